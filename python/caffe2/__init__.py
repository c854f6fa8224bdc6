"""Caffe2's module layout over lockstep: ``caffe2.python.core``, ``workspace``, ``model_helper``, ``brew``,
``optimizer``, ``data_parallel_model``, ... and ``caffe2.proto.caffe2_pb2``, so that Caffe2 programs run
unchanged. Each module is a thin adapter over lockstep's own (docs/python.md lists what maps to what); what
lockstep cannot do stops the program with one line naming it."""
