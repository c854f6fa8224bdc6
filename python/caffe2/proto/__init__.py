"""caffe2.proto: Caffe2's protobuf messages, which are lockstep's (lockstep_pb2 keeps their field numbers)."""
