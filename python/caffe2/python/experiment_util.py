"""Caffe2's ``experiment_util.ModelTrainerLog``: the trainer's CSV log through lockstep's (the same file
name, first line and columns as ``lockstep train`` writes)."""
import datetime
import socket
import time

from caffe2.python._unsupported import missing_names, refuse
from lockstep._core import C

# The columns after inputs_per_sec, which ``additional_values`` gives (Caffe2 writes its keys sorted).
_VALUES = ("accuracy", "epoch", "learning_rate", "loss", "test_accuracy")


def _number(value):
    """A logged figure: a number, or a blob of one value (a fetched loss)."""
    return float(value.reshape(-1)[0]) if hasattr(value, "reshape") else float(value)


class ExternalLogger:
    """Receives the runtime arguments once and each logged row (a dict), as Caffe2's."""

    def set_runtime_args(self, runtime_args):
        raise NotImplementedError

    def log(self, log_dict):
        raise NotImplementedError


class ModelTrainerLog:
    """``{expname}_{YYYYmmdd_HHMMSS}.log`` in the working directory: ``# `` and the runtime arguments, the
    header, then a row per ``log`` call with the time and inputs since the previous one."""

    def __init__(self, expname, runtime_args, external_loggers=None):
        now = datetime.datetime.fromtimestamp(time.time())
        self.experiment_id = f"{expname}_{now.strftime('%Y%m%d_%H%M%S')}"
        self._log = C.CsvLog(".", f"{self.experiment_id}.log", str(runtime_args))
        self.filename = self._log.path
        self.start_time = self.last_time = time.time()
        self.last_input_count = 0
        self.external_loggers = list(external_loggers or [])
        if self.external_loggers:
            args = dict(runtime_args if isinstance(runtime_args, dict) else vars(runtime_args))
            args.update(experiment_id=self.experiment_id, hostname=socket.gethostname())
            for logger in self.external_loggers:
                logger.set_runtime_args(args)

    def log(self, input_count, batch_count, additional_values):
        unknown = sorted(set(additional_values) - set(_VALUES))
        if unknown:
            refuse(f"ModelTrainerLog.log: columns {', '.join(unknown)} are not in the trainer's log; it has "
                   f"{', '.join(_VALUES)}")
        now = time.time()
        record = C.EpochRecord()
        record.time_spent = now - self.last_time
        record.cumulative_time_spent = now - self.start_time
        record.input_count = int(input_count - self.last_input_count)
        record.cumulative_input_count = int(input_count)
        record.cumulative_batch_count = int(batch_count)
        record.test_accuracy = -1.0
        for key, value in additional_values.items():
            setattr(record, key, int(value) if key == "epoch" else _number(value))
        self.last_time, self.last_input_count = now, input_count
        self._log.append(record)
        row = {key: getattr(record, key) for key in ("time_spent", "cumulative_time_spent", "input_count",
                                                     "cumulative_input_count", "cumulative_batch_count")}
        row["inputs_per_sec"] = record.input_count / record.time_spent if record.time_spent > 0 else 0.0
        row.update((key, getattr(record, key)) for key in _VALUES)
        for logger in self.external_loggers:
            logger.log(row)


# Caffe2 names this adapter lacks: one line naming them.
__getattr__ = missing_names("caffe2.python.experiment_util")
