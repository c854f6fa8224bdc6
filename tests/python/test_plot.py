"""lockstep.plot: reading the epoch and --iter_log CSV logs, the PNG it draws, its command line, and
`lockstep plot`. Run with the folder holding the lockstep package on PYTHONPATH (build/python)."""

import os
import subprocess
import sys

import matplotlib.image
import numpy as np
import pytest

from lockstep import plot as lsplot

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.environ.get("LOCKSTEP_CLI_PATH", os.path.join(REPO, "build", "lockstep"))
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(lsplot.__file__)))
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# The rows as CsvLog::Append and IntervalLog::Report format them (src/lockstep/train/csv_log.cc,
# interval_log.cc).
EPOCH_HEADER = (
    "time_spent,cumulative_time_spent,input_count,cumulative_input_count,cumulative_batch_count,"
    "inputs_per_sec,accuracy,epoch,learning_rate,loss,test_accuracy"
)
ITERATION_HEADER = (
    "unix_time,elapsed_seconds,epoch,iteration,iterations,inputs_per_sec,loss,accuracy,learning_rate,"
    "epoch_eta_seconds,run_eta_seconds"
)


def epoch_log(path, test_accuracies=(-1, -1, -1)):
    rows = []
    for epoch, test in enumerate(test_accuracies, start=1):
        rows.append(
            f"{2.0:.6f},{2.0 * epoch:.6f},512,{512 * epoch},{2 * epoch},{256.0 + epoch:.4f},"
            f"{0.5 + 0.1 * epoch:.6f},{epoch},{0.1:.6g},{2.0 / epoch:.6f},{test:.6f}"
        )
    path.write_text(f"# train --model lenet --use_cpu\n{EPOCH_HEADER}\n" + "\n".join(rows) + "\n")
    return path


def iteration_log(path, iterations=4, epochs=2):
    rows = []
    for epoch in range(1, epochs + 1):
        for iteration in range(1, iterations + 1):
            step = (epoch - 1) * iterations + iteration
            rows.append(
                f"{1764000000.0 + step:.3f},{float(step):.3f},{epoch},{iteration},{iterations},"
                f"{100.0 * step:.4f},{1.0 / step:.6f},{0.1 * step:.6f},{0.05:.6g},{1.0:.1f},{2.0:.1f}"
            )
    path.write_text(f"{ITERATION_HEADER}\n" + "\n".join(rows) + "\n")
    return path


def expect_png(path, panels):
    with open(path, "rb") as f:
        assert f.read(8) == PNG_SIGNATURE
    image = matplotlib.image.imread(path)
    width = round(lsplot.WIDTH_INCHES * lsplot.DPI)
    height = round(lsplot.PANEL_INCHES * lsplot.DPI * panels)
    assert image.shape[:2] == (height, width)


def test_reads_epoch_log(tmp_path):
    log = lsplot.read_log(epoch_log(tmp_path / "run.log", test_accuracies=(-1, 0.5, 0.75)))
    assert log.kind == lsplot.EPOCH
    assert list(log) == EPOCH_HEADER.split(",")
    np.testing.assert_array_equal(log["epoch"], [1, 2, 3])
    np.testing.assert_allclose(log["loss"], [2.0, 1.0, 2.0 / 3], rtol=1e-6)
    np.testing.assert_allclose(log["inputs_per_sec"], [257, 258, 259])
    np.testing.assert_array_equal(log.x(), [1, 2, 3])
    np.testing.assert_array_equal(log.test_accuracy(), [np.nan, 0.5, 0.75])


def test_epoch_log_without_test_data_has_no_test_accuracy(tmp_path):
    log = lsplot.read_log(epoch_log(tmp_path / "run.log"))
    np.testing.assert_array_equal(log["test_accuracy"], [-1, -1, -1])
    assert log.test_accuracy() is None


def test_reads_iteration_log_with_iterations_since_the_start(tmp_path):
    log = lsplot.read_log(iteration_log(tmp_path / "iter.csv", iterations=4, epochs=2))
    assert log.kind == lsplot.ITERATION
    assert list(log) == ITERATION_HEADER.split(",")
    np.testing.assert_array_equal(log.x(), np.arange(1, 9))
    np.testing.assert_allclose(log["inputs_per_sec"], 100 * np.arange(1, 9))
    assert log.test_accuracy() is None


def test_an_iteration_log_holds_each_run_that_wrote_it(tmp_path):
    path = iteration_log(tmp_path / "iter.csv", iterations=4, epochs=2)
    rows = path.read_text().splitlines()[1:]
    with open(path, "a") as f:  # a fresh run appends its rows from iteration 1 again
        f.write("\n".join(rows[:3]) + "\n")
    log = lsplot.read_log(path)
    assert log.runs() == [slice(0, 8), slice(8, 11)]
    np.testing.assert_array_equal(log.x()[log.runs()[1]], [1, 2, 3])
    # A run resumed from its newest checkpoint goes on above the last row: still one run.
    resumed = lsplot.read_log(iteration_log(tmp_path / "resumed.csv", iterations=4, epochs=3))
    assert resumed.runs() == [slice(0, 12)]
    output = tmp_path / "runs.png"
    lsplot.plot([log, resumed], output)
    expect_png(output, panels=3)


def test_header_only_log_reads_as_empty_columns(tmp_path):
    path = tmp_path / "iter.csv"
    path.write_text(ITERATION_HEADER + "\n")
    log = lsplot.read_log(path)
    assert all(len(values) == 0 for values in log.values())
    with pytest.raises(ValueError, match="iter.csv: no rows to plot"):
        lsplot.plot([log], tmp_path / "out.png")


@pytest.mark.parametrize(
    "text, message",
    [
        ("", r"bad\.log: no CSV header"),
        ("# train --model lenet\n", r"bad\.log: no CSV header"),
        ("a,b,c\n1,2,3\n", r"bad\.log: line 1: unknown log format"),
        (f"# args\n{EPOCH_HEADER}\n1,2,3\n", r"bad\.log: line 3: 3 cells, the header has 11"),
        (
            f"# args\n{EPOCH_HEADER}\n{','.join(['1'] * 10 + ['nan'])}\n{','.join(['1'] * 9 + ['x', '1'])}\n",
            r"bad\.log: line 4: column loss: not a number: 'x'",
        ),
    ],
)
def test_bad_log_gives_one_line_naming_the_file(tmp_path, text, message):
    path = tmp_path / "bad.log"
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as error:
        lsplot.read_log(path)
    assert "\n" not in str(error.value)


def test_missing_log_is_an_os_error_naming_the_file(tmp_path):
    with pytest.raises(FileNotFoundError) as error:
        lsplot.read_log(tmp_path / "missing.log")
    assert error.value.filename == str(tmp_path / "missing.log")


def test_plots_epoch_logs_with_a_test_accuracy_panel_when_one_has_it(tmp_path):
    without = epoch_log(tmp_path / "a.log")
    output = tmp_path / "curves.png"
    assert lsplot.plot([without], output) == ["training loss", "training accuracy", "images/s"]
    expect_png(output, panels=3)
    with_test = epoch_log(tmp_path / "b.log", test_accuracies=(0.6, 0.7, 0.8))
    titles = lsplot.plot([without, with_test], output, labels=["no test", "test"])
    assert titles == ["training loss", "training accuracy", "test accuracy", "images/s"]
    expect_png(output, panels=4)
    assert sorted(os.listdir(tmp_path)) == ["a.log", "b.log", "curves.png"]  # no temporary left


def test_plots_iteration_logs(tmp_path):
    output = tmp_path / "iter.png"
    lsplot.plot([iteration_log(tmp_path / "a.csv"), iteration_log(tmp_path / "b.csv", epochs=3)], output)
    expect_png(output, panels=3)


def test_refuses_to_mix_epoch_and_iteration_logs(tmp_path):
    with pytest.raises(ValueError, match="cannot draw epoch logs and --iter_log logs on one x axis"):
        lsplot.plot([epoch_log(tmp_path / "a.log"), iteration_log(tmp_path / "b.csv")], tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def test_failed_write_keeps_the_old_output_and_leaves_no_temporary(tmp_path, monkeypatch):
    output = tmp_path / "curves.png"
    output.write_bytes(b"old")
    log = epoch_log(tmp_path / "a.log")

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("matplotlib.figure.Figure.savefig", fail)
    with pytest.raises(OSError):
        lsplot.plot([log], output)
    assert output.read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["a.log", "curves.png"]


def test_main_writes_and_reports(tmp_path, capsys):
    log = epoch_log(tmp_path / "a.log")
    output = tmp_path / "curves.png"
    assert lsplot.main([str(log), "-o", str(output), "--labels", "lenet"]) == 0
    out = capsys.readouterr().out
    assert out == f"wrote {output}: 1 log, training loss, training accuracy, images/s\n"
    expect_png(output, panels=3)
    assert lsplot.main([str(log), "-o", str(tmp_path / "new" / "curves.png")]) == 0  # its folder is made
    expect_png(tmp_path / "new" / "curves.png", panels=3)


def test_main_leaves_out_logs_without_rows_when_others_have_some(tmp_path, capsys):
    good = epoch_log(tmp_path / "a.log")
    empty = tmp_path / "b.log"
    empty.write_text("\n".join(good.read_text().splitlines()[:2]) + "\n")  # a run that failed before a row
    output = tmp_path / "curves.png"
    assert lsplot.main([str(good), str(empty), "-o", str(output), "--labels", "good,empty"]) == 0
    captured = capsys.readouterr()
    assert captured.err == f"lockstep.plot: warning: {empty}: no rows (the run wrote none); left out\n"
    assert captured.out.startswith(f"wrote {output}: 1 log, ")
    expect_png(output, panels=3)
    assert lsplot.main([str(empty), "-o", str(output)]) == 2  # nothing to draw at all
    assert "b.log: no rows to plot" in capsys.readouterr().err


@pytest.mark.parametrize(
    "arguments, status, message",
    [
        (["{log}"], 2, "the following arguments are required: -o/--output"),
        (["{log}", "-o", "{dir}/x.png", "--labels", "a,b"], 2, "lockstep.plot: error: --labels has 2 labels for 1 log"),
        (["{log}", "-o", "{dir}/x.pdf"], 2, "-o {dir}/x.pdf: the output is a PNG"),
        (["{dir}/missing.log", "-o", "{dir}/x.png"], 2, "{dir}/missing.log: cannot read it"),
        (["{log}", "-o", "{dir}/a.log/x.png"], 1, "cannot write {dir}/a.log/x.png: Not a directory"),
    ],
)
def test_main_errors_are_one_line_with_a_status(tmp_path, capsys, arguments, status, message):
    log = epoch_log(tmp_path / "a.log")
    fill = {"log": str(log), "dir": str(tmp_path)}
    assert lsplot.main([a.format(**fill) for a in arguments]) == status
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert message.format(**fill) in captured.err
    assert not (tmp_path / "x.png").exists()


def test_runs_as_a_module(tmp_path):
    log = epoch_log(tmp_path / "a.log")
    environment = dict(os.environ, PYTHONPATH=PACKAGE_DIR)
    run = subprocess.run([sys.executable, "-m", "lockstep.plot", str(log), "-o", str(tmp_path / "c.png")],
                         capture_output=True, text=True, env=environment)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(f"wrote {tmp_path / 'c.png'}")
    expect_png(tmp_path / "c.png", panels=3)


def need_cli():
    if not os.access(CLI, os.X_OK):
        pytest.skip(f"no lockstep CLI at {CLI} (build it, or set LOCKSTEP_CLI_PATH)")


def run_cli(arguments, **environment):
    env = dict(os.environ, LOCKSTEP_PYTHON_DIR=PACKAGE_DIR)
    env.update(environment)
    return subprocess.run([CLI] + arguments, capture_output=True, text=True, env=env)


def test_plots_the_logs_of_a_real_training_run(tmp_path):
    need_cli()
    iter_log = tmp_path / "iter.csv"
    run = run_cli(["train", "--use_cpu", "--model", "lenet", "--train_data", "null", "--num_channels", "1",
                   "--image_size", "28", "--num_labels", "10", "--batch_size", "8", "--epoch_size", "64",
                   "--num_epochs", "2", "--threads", "1", "--log_every_iters", "2", "--log_every_secs", "0",
                   "--iter_log", str(iter_log), "--log_dir", str(tmp_path)])
    assert run.returncode == 0, run.stderr
    epoch_path = tmp_path / [name for name in os.listdir(tmp_path) if name.endswith(".log")][0]
    epochs = lsplot.read_log(epoch_path)
    assert epochs.kind == lsplot.EPOCH
    np.testing.assert_array_equal(epochs["epoch"], [1, 2])
    np.testing.assert_array_equal(epochs["cumulative_input_count"], [64, 128])
    assert epochs.test_accuracy() is None
    iterations = lsplot.read_log(iter_log)
    assert iterations.kind == lsplot.ITERATION
    np.testing.assert_array_equal(iterations.x(), [2, 4, 6, 8, 10, 12, 14, 16])

    output = tmp_path / "curves.png"
    run = run_cli(["plot", str(epoch_path), "-o", str(output)])
    assert run.returncode == 0, run.stderr
    assert run.stdout == f"wrote {output}: 1 log, training loss, training accuracy, images/s\n"
    expect_png(output, panels=3)
    run = run_cli(["plot", "-o", str(output), "--labels", "every 2nd step", "--", str(iter_log)])
    assert run.returncode == 0, run.stderr
    expect_png(output, panels=3)


def test_cli_subcommand_errors(tmp_path):
    need_cli()
    missing = tmp_path / "missing.log"
    run = run_cli(["plot", str(missing), "-o", str(tmp_path / "x.png")])
    assert run.returncode == 2
    assert run.stderr == f"lockstep: error: {missing}: cannot read it: No such file or directory\n"
    run = run_cli(["plot", str(missing)])  # the PNG would go beside the log: missing.png
    assert run.returncode == 2
    assert run.stderr == f"lockstep: error: {missing}: cannot read it: No such file or directory\n"
    (tmp_path / "missing.png").write_text("an earlier plot")
    run = run_cli(["plot", str(missing)])
    assert run.returncode == 2
    assert run.stderr == (f"lockstep: error: {tmp_path / 'missing.png'} exists: pass --output to name the file "
                          "to write (a file named there is replaced)\n")
    run = run_cli(["plot", str(missing), "-o", str(tmp_path / "x.png")], LOCKSTEP_PYTHON_DIR=str(tmp_path))
    assert run.returncode == 2  # running it again fails the same way
    assert run.stderr.startswith(f"lockstep: error: plot: the lockstep Python package is not in {tmp_path}")
    assert "LOCKSTEP_PYTHON_DIR" in run.stderr and run.stderr.count("\n") == 1
    run = run_cli(["plot", "--help"])
    assert run.returncode == 0
    assert "training loss" in run.stdout and "--labels" in run.stdout and "--output" in run.stdout
