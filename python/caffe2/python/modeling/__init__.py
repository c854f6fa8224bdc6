"""caffe2.python.modeling: parameter initializers."""
