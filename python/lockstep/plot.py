"""Training curves from lockstep's CSV logs, drawn into one PNG.

Reads the per-epoch log that `lockstep train` writes (Caffe2's resnet50_trainer format, see
src/lockstep/train/csv_log.h) and the per-interval log of `--iter_log` (src/lockstep/train/interval_log.h).
Pure Python: numpy and matplotlib (Agg), nothing compiled from lockstep.

    python3 -m lockstep.plot run1.log run2.log -o curves.png --labels lr0.1,lr0.2
"""

import argparse
import errno
import os
import sys
import tempfile

import numpy as np

EPOCH = "epoch"
ITERATION = "iteration"

# The headers the two logs write, as the C++ declares them (CsvLog::kHeader, IntervalLog::kCsvHeader). A log
# with more columns than these still reads, so that a later column does not break old plots.
EPOCH_COLUMNS = (
    "time_spent,cumulative_time_spent,input_count,cumulative_input_count,cumulative_batch_count,"
    "inputs_per_sec,accuracy,epoch,learning_rate,loss,test_accuracy"
).split(",")
ITERATION_COLUMNS = (
    "unix_time,elapsed_seconds,epoch,iteration,iterations,inputs_per_sec,loss,accuracy,learning_rate,"
    "epoch_eta_seconds,run_eta_seconds"
).split(",")

# Pixel size of the figure: one panel of PANEL_INCHES per row, at DPI.
DPI = 100
WIDTH_INCHES = 8.0
PANEL_INCHES = 2.6
LINE_STYLES = ("-", "--", ":", "-.")  # a log's runs, in order


class Log(dict):
    """Column name -> numpy array of one log, with its `kind` (EPOCH or ITERATION) and `path`."""

    def __init__(self, columns, kind, path):
        super().__init__(columns)
        self.kind = kind
        self.path = path

    def x(self):
        """The x axis: the epoch (1-based) of an epoch log, the iteration since the run's start of an
        iteration log (a resumed run continues its count)."""
        if self.kind == EPOCH:
            return self["epoch"]
        return (self["epoch"] - 1) * self["iterations"] + self["iteration"]

    def runs(self):
        """The runs the log holds, as slices of its rows: an iteration log gets the rows of every run that
        wrote it, and a fresh run starts over at a smaller x than the last row (a run resumed from its newest
        checkpoint goes on above it)."""
        x = self.x()
        starts = [0] + [i for i in range(1, len(x)) if x[i] <= x[i - 1]] + [len(x)]
        return [slice(begin, end) for begin, end in zip(starts, starts[1:])]

    def test_accuracy(self):
        """The test accuracy with NaN where there was none (the epoch log writes -1 without test data), or
        None when the log has none at all."""
        if "test_accuracy" not in self:
            return None
        values = np.where(self["test_accuracy"] < 0, np.nan, self["test_accuracy"])
        return None if np.all(np.isnan(values)) else values


def read_log(path):
    """Reads an epoch or iteration log into a Log; raises OSError (as open() does) for a file that cannot be
    read, ValueError naming the file and what is wrong for one that is no log."""
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: cannot read it: {e}") from None
    # The epoch log opens with "# " and the trainer's arguments; the iteration log with its header.
    number = 0
    while number < len(lines) and (lines[number].startswith("#") or not lines[number].strip()):
        number += 1
    if number == len(lines):
        raise ValueError(f"{path}: no CSV header (is it a lockstep training log?)")
    header = [name.strip() for name in lines[number].split(",")]
    kind = _kind(header)
    if kind is None:
        raise ValueError(
            f"{path}: line {number + 1}: unknown log format: the header is neither the epoch log's "
            f"({','.join(EPOCH_COLUMNS[:3])},...) nor --iter_log's ({','.join(ITERATION_COLUMNS[:3])},...)"
        )
    rows = []
    for index in range(number + 1, len(lines)):
        line = lines[index]
        if not line.strip():
            continue
        cells = line.split(",")
        if len(cells) != len(header):
            raise ValueError(f"{path}: line {index + 1}: {len(cells)} cells, the header has {len(header)}")
        row = []
        for name, cell in zip(header, cells):
            try:
                row.append(float(cell))
            except ValueError:
                raise ValueError(f"{path}: line {index + 1}: column {name}: not a number: {cell!r}") from None
        rows.append(row)
    table = np.array(rows, dtype=np.float64).reshape(len(rows), len(header))
    return Log({name: table[:, i] for i, name in enumerate(header)}, kind, path)


def _kind(header):
    names = set(header)
    if len(names) != len(header):
        return None
    if names.issuperset(EPOCH_COLUMNS):
        return EPOCH
    if names.issuperset(ITERATION_COLUMNS):
        return ITERATION
    return None


def plot(logs, output, labels=None):
    """Draws the logs (paths or Logs of one kind) into the PNG `output`: panels for the training loss,
    training accuracy, test accuracy (when some log has it) and images/s, one colour per log labelled by its
    file name or by `labels`, one line per run it holds (dashed and dotted after the first). Writes a
    temporary file beside `output` and renames it, so that `output` is either the whole new PNG or what it
    was before. Returns the panel titles."""
    logs = [log if isinstance(log, Log) else read_log(log) for log in logs]
    if not logs:
        raise ValueError("no logs to plot")
    labels = _labels(logs) if labels is None else list(labels)
    if len(labels) != len(logs):
        raise ValueError(f"{_count(len(labels), 'label')} for {_count(len(logs), 'log')}")
    kinds = {log.kind for log in logs}
    if len(kinds) > 1:
        raise ValueError(
            "cannot draw epoch logs and --iter_log logs on one x axis: "
            + ", ".join(f"{log.path} is an {log.kind} log" for log in logs)
        )
    for log in logs:
        if len(log.x()) == 0:
            raise ValueError(f"{log.path}: no rows to plot (the run wrote none yet)")

    panels = [
        ("training loss", lambda log: log["loss"]),
        ("training accuracy", lambda log: log["accuracy"]),
    ]
    if any(log.test_accuracy() is not None for log in logs):
        panels.append(("test accuracy", lambda log: log.test_accuracy()))
    panels.append(("images/s", lambda log: log["inputs_per_sec"]))

    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    # A Figure without pyplot: no global state, nothing kept alive after the call.
    figure = Figure(figsize=(WIDTH_INCHES, PANEL_INCHES * len(panels)), dpi=DPI, layout="constrained")
    axes = figure.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (title, values) in zip(axes, panels):
        for number, (log, label) in enumerate(zip(logs, labels)):
            y = values(log)
            if y is None:
                continue
            runs = log.runs()
            for run_number, run in enumerate(runs):
                # The log's colour stays the same in every panel, with test accuracy or not.
                ax.plot(log.x()[run], y[run], color=f"C{number % 10}", linestyle=LINE_STYLES[run_number % 4],
                        marker="o" if len(y) < 30 else None, markersize=3,
                        label=(f"{label} ({len(runs)} runs)" if len(runs) > 1 else label) if run_number == 0
                        else None)
        ax.set_ylabel(title)
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize="small")
    axes[-1].set_xlabel("epoch" if logs[0].kind == EPOCH else "iteration")
    if logs[0].kind == EPOCH:
        axes[-1].xaxis.get_major_locator().set_params(integer=True)
    _write_atomically(figure, os.fspath(output))
    return [title for title, _ in panels]


def _count(number, noun):
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _labels(logs):
    names = [os.path.basename(log.path) for log in logs]
    # Two runs' logs of the same name in different folders: their paths tell them apart.
    return [log.path if names.count(name) > 1 else name for log, name in zip(logs, names)]


def _write_atomically(figure, output):
    directory = os.path.dirname(os.path.abspath(output))
    try:
        os.makedirs(directory, exist_ok=True)  # as the trainer makes its output folders
    except FileExistsError:  # a file stands where a folder of the path would be
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), directory) from None
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(output)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            figure.savefig(f, format="png", dpi=DPI)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # mkstemp's 0600 would hide the plot from the group
        os.replace(temporary, output)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line, said by `speaker` as the other errors are: the usage is
    in --help."""

    def __init__(self, speaker, **kwargs):
        super().__init__(**kwargs)
        self.speaker = speaker

    def error(self, message):
        self.exit(2, f"{self.speaker}: error: {message} (see {self.prog} --help)\n")


def main(argv=None):
    """The command line; returns the exit status: 0; 2 for bad arguments and for logs that cannot be read or
    drawn (running it again fails the same way); 1 when the PNG cannot be written (0 after --help)."""
    # `lockstep plot` runs this module under its own name, so its lines read as the other commands' do.
    command = os.environ.get("LOCKSTEP_PLOT_COMMAND", "python3 -m lockstep.plot")
    speaker = "lockstep" if command.startswith("lockstep ") else "lockstep.plot"
    parser = _Parser(
        speaker,
        prog=command,
        description="Draw training curves from lockstep's CSV logs into one PNG: training loss, training "
        "accuracy, test accuracy (when a log has it) and images/s, one line per log. Takes the per-epoch "
        "logs of `lockstep train` (x axis: epochs) or the --iter_log logs (x axis: iterations), not both.",
    )
    parser.add_argument("logs", nargs="+", metavar="LOG", help="a per-epoch log or an --iter_log CSV")
    parser.add_argument("-o", "--output", required=True, metavar="PNG",
                        help="the PNG to write (replaced atomically when it exists)")
    parser.add_argument("--labels", metavar="A,B,...",
                        help="comma-separated legend labels, one per LOG (default: the file names)")
    try:
        args = parser.parse_args(argv)
        labels = None
        if args.labels is not None:
            labels = args.labels.split(",")
            if len(labels) != len(args.logs):
                parser.error(f"--labels has {_count(len(labels), 'label')} for {_count(len(args.logs), 'log')}")
        if not args.output.lower().endswith(".png"):
            parser.error(f"-o {args.output}: the output is a PNG; name it *.png")
    except SystemExit as e:  # argparse exits; callers of main get the status instead
        return e.code
    try:
        try:
            logs = [read_log(path) for path in args.logs]
        except OSError as e:
            raise ValueError(f"{e.filename}: cannot read it: {e.strerror or e}") from None
        # A run that failed or was stopped before its first row leaves a header: draw the others.
        empty = [log for log in logs if len(log.x()) == 0]
        if empty and len(empty) < len(logs):
            for log in empty:
                print(f"{speaker}: warning: {log.path}: no rows (the run wrote none); left out",
                      file=sys.stderr)
            kept = [i for i, log in enumerate(logs) if len(log.x()) > 0]
            logs = [logs[i] for i in kept]
            labels = None if labels is None else [labels[i] for i in kept]
        titles = plot(logs, args.output, labels)
    except ValueError as e:
        print(f"{speaker}: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"{speaker}: error: cannot write {args.output}: {e.strerror or e}", file=sys.stderr)
        return 1
    print(f"wrote {args.output}: {_count(len(logs), 'log')}, "
          f"{', '.join(titles)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
