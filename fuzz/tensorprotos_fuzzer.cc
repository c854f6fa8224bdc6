// Fuzzes the Caffe2 TensorProtos record decoder (image tensor + label tensor).
#include "image_record_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzImageRecord(data, size, lockstep::RecordFormat::kTensorProtos);
  return 0;
}
