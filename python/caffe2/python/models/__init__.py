"""caffe2.python.models: the model zoo's builders."""
