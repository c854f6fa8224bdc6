// Model and data parallelism as a user writes them, after the Torch example: a conv + relu block on each of
// two CPU devices (DeviceScope around each block; the copies between them are added automatically), and a
// DataParallelTable of such two-device replicas fed whole Fashion-MNIST batches. The batch of every replica
// runs as pipelined micro-batches.
//
//   build/model_parallel_convnet [replicas] [epochs]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "lockstep/core/net.h"
#include "lockstep/data/batch_source.h"
#include "lockstep/data/idx_dataset.h"
#include "lockstep/model/layers.h"
#include "lockstep/parallel/data_parallel_table.h"

using namespace lockstep;

// One replica: block 1 on its first device, block 2 and the classifier on its second.
std::string TwoDeviceClassifier(ModelHelper& model, const std::string& data) {
  const auto& devices = model.replica().devices;  // the table gives each replica two devices
  std::string x;
  {
    ModelHelper::DeviceScope on(model, devices[0]);
    x = layers::Relu(model, layers::Conv(model, data, "conv1", 1, 16, 5, {}), "relu1");
    x = layers::MaxPool(model, x, "pool1", 2, 2);  // 12x12
  }
  ModelHelper::DeviceScope on(model, devices[1]);
  x = layers::Relu(model, layers::Conv(model, x, "conv2", 16, 32, 5, {}), "relu2");
  x = layers::MaxPool(model, x, "pool2", 2, 2);  // 4x4
  x = layers::Relu(model, layers::FC(model, x, "fc3", 32 * 4 * 4, 128), "relu3");
  return layers::FC(model, x, "fc4", 128, 10);
}

int main(int argc, char** argv) try {
  if (argc > 1 && argv[1][0] == '-') {  // -h, --help
    std::printf("usage: %s [replicas (2)] [epochs (1)]: a convnet on Fashion-MNIST, in 2 stages a replica\n",
                argv[0]);
    return 0;
  }
  const int replicas = argc > 1 ? std::atoi(argv[1]) : 2;
  const int epochs = argc > 2 ? std::atoi(argv[2]) : 1;
  const int batch_size = 128;  // the whole batch; the table splits it among the replicas

  DataParallelTableOptions options;
  for (int d = 0; d < 2 * replicas; ++d) options.devices.push_back(d);
  options.devices_per_replica = 2;
  options.micro_batches = 4;
  options.sgd.base_learning_rate = 0.05f;
  ModelHelper model("table");
  DataParallelTable table = MakeDataParallelTable(model, TwoDeviceClassifier, options);

  auto train = std::make_shared<ImageDataset>(LoadFashionMnist(/*train=*/true));
  DatasetSource source(train, /*train=*/true, /*seed=*/1);
  Workspace ws;
  ws.RunNetOnce(model.param_init_net());
  Net* net = ws.CreateNet(model.net());
  const int64_t steps = train->size() / batch_size;
  for (int epoch = 1; epoch <= epochs; ++epoch)
    for (int64_t step = 0; step < steps; ++step) {
      source.Fill(((epoch - 1) * steps + step) * batch_size, batch_size, ws.CreateBlob("data"),
                  ws.CreateBlob("label"));
      net->Run();
      if ((step + 1) % 100 == 0) {
        // The gathered outputs hold every image of the batch, in batch order.
        const Tensor& logits = ws.Blob(table.output);
        const int32_t* labels = ws.Blob("label").data<int32_t>();
        int correct = 0;
        for (int i = 0; i < batch_size; ++i) {
          const float* row = logits.data<float>() + i * 10;
          correct += std::max_element(row, row + 10) - row == labels[i];
        }
        std::printf("epoch %d step %lld: loss %.4f (replica 0), batch accuracy %.3f\n", epoch,
                    static_cast<long long>(step + 1), ws.Blob(table.losses[0]).data<float>()[0],
                    static_cast<double>(correct) / batch_size);
      }
    }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
