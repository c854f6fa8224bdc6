// Fuzzes the Caffe Datum record decoder, and the format detection that tells it from TensorProtos.
#include "image_record_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzImageRecord(data, size, lockstep::RecordFormat::kDatum);
  FuzzImageRecord(data, size, lockstep::RecordFormat::kAuto);
  return 0;
}
