"""caffe2.python.predictor: saving a trained model for prediction and loading it back."""
