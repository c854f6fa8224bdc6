"""Caffe2's ``rnn_cell``: recurrent networks are not among lockstep's operators."""
from caffe2.python._unsupported import refuse

refuse("RNN cells (caffe2.python.rnn_cell) are not supported; lockstep trains feed-forward networks")
