// The batch reader: replicas read disjoint slices of the same global batches, and slices filled ahead by
// producer threads match slices read on demand.
#include "lockstep/data/batch_reader.h"

#include <memory>
#include <vector>

#include "test_util.h"

namespace lockstep::testing {

TEST(BatchReader, ReplicasReadDisjointSlicesOfTheSameGlobalBatches) {
  // A source that records which stream positions were read.
  struct Recorder : BatchSource {
    std::vector<int64_t> positions;
    void Fill(int64_t first, int64_t count, Tensor* data, Tensor* label) override {
      data->Resize({count, 1, 1, 1});
      label->Resize({count}, DataType::kInt32);
      for (int64_t i = 0; i < count; ++i) positions.push_back(first + i);
    }
    int64_t size() const override { return 1000; }
  };
  auto recorder = std::make_shared<Recorder>();
  BatchReader reader(recorder, 3, 2);
  reader.Seek(100);
  Tensor data, label;
  reader.Read(1, &data, &label);  // replicas read at their own pace
  reader.Read(0, &data, &label);
  reader.Read(0, &data, &label);
  reader.Read(1, &data, &label);
  EXPECT_EQ(recorder->positions,
            (std::vector<int64_t>{103, 104, 105, 100, 101, 102, 106, 107, 108, 109, 110, 111}));
}

// Slices filled ahead by producer threads hold the same records, in the same order, as slices read on
// demand; a Seek drops what was filled ahead, and an error of the source reaches the step that reads it.
TEST(BatchReader, PrefetchedSlicesMatchSlicesReadOnDemand) {
  // Each record's pixel is its stream position; position 7 cannot be read.
  struct Positions : BatchSource {
    void Fill(int64_t first, int64_t count, Tensor* data, Tensor* label) override {
      data->Resize({count, 1, 1, 1});
      label->Resize({count}, DataType::kInt32);
      for (int64_t i = 0; i < count; ++i) {
        if (first + i == 7) throw InvalidInput("record 7 is broken");
        data->data<float>()[i] = static_cast<float>(first + i);
        label->data<int32_t>()[i] = static_cast<int32_t>(first + i) % 10;
      }
    }
    int64_t size() const override { return 1000; }
  };
  auto source = std::make_shared<Positions>();
  BatchReader on_demand(source, 2, 2), ahead(source, 2, 2, /*prefetch=*/3);
  on_demand.Seek(100);
  ahead.Seek(100);
  for (int step = 0; step < 5; ++step)
    for (int replica : {1, 0}) {
      Tensor a, b, la, lb;
      on_demand.Read(replica, &a, &la);
      ahead.Read(replica, &b, &lb);
      EXPECT_EQ(Values(a), Values(b)) << "step " << step << " replica " << replica;
      EXPECT_EQ(Values(a)[0], 100 + step * 4 + replica * 2);
    }
  ahead.Seek(4);  // replica 0 reads 4-5, replica 1 reads 6-7: the broken record
  Tensor data, label;
  ahead.Read(0, &data, &label);
  EXPECT_EQ(Values(data), (std::vector<float>{4, 5}));
  EXPECT_THROW(ahead.Read(1, &data, &label), InvalidInput);
  ahead.Read(1, &data, &label);  // the stream goes on
  EXPECT_EQ(Values(data), (std::vector<float>{10, 11}));
}

}  // namespace lockstep::testing
