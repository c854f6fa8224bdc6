"""caffe2.python: Caffe2's Python modules as adapters over lockstep's."""
