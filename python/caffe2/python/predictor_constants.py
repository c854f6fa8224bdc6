"""Caffe2's ``predictor_constants``: the names of a saved predictor's nets and blob lists."""
import types

from caffe2.python._unsupported import missing_names

# Each net and blob-list key is its own name; the two blobs' names start with "!!".
predictor_constants = types.SimpleNamespace(
    META_NET_DEF="!!META_NET_DEF", PREDICTOR_DBREADER="!!PREDICTOR_DBREADER",
    **{key: key for key in ("PARAMETERS_BLOB_TYPE", "INPUTS_BLOB_TYPE", "OUTPUTS_BLOB_TYPE", "GLOBAL_INIT_NET_TYPE",
                            "PREDICT_INIT_NET_TYPE", "PREDICT_NET_TYPE", "SINGLE_PREDICTOR", "MULTI_PREDICTOR",
                            "TRAIN_INIT_PLAN_TYPE", "TRAIN_PLAN_TYPE")})


# Caffe2 names this adapter lacks: one line naming them.
__getattr__ = missing_names("caffe2.python.predictor_constants")
