// Data-parallel training as a user writes it: a small convolutional net on Fashion-MNIST, replicated on
// two CPU devices by Parallelize from three builder functions, then evaluated on device 0's parameters.
//
//   build/data_parallel_convnet [devices] [epochs]
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "lockstep/core/net.h"
#include "lockstep/data/batch_reader.h"
#include "lockstep/data/idx_dataset.h"
#include "lockstep/model/layers.h"
#include "lockstep/model/optimizer.h"
#include "lockstep/parallel/data_parallel.h"

using namespace lockstep;

// The forward pass of one replica, from the data blob to the logits. The same code builds the test net.
std::string Classifier(ModelHelper& model, const std::string& data, bool is_test) {
  std::string x = layers::Conv(model, data, "conv1", 1, 16, 5, {});
  x = layers::SpatialBN(model, x, "bn1", 16, is_test, /*relu=*/true);
  x = layers::MaxPool(model, x, "pool1", 2, 2);  // 12x12
  x = layers::Conv(model, x, "conv2", 16, 32, 5, {});
  x = layers::SpatialBN(model, x, "bn2", 32, is_test, /*relu=*/true);
  x = layers::MaxPool(model, x, "pool2", 2, 2);  // 4x4
  x = layers::FC(model, x, "fc3", 32 * 4 * 4, 128);
  x = layers::Relu(model, x, "relu3");
  return layers::FC(model, x, "fc4", 128, 10);
}

int main(int argc, char** argv) try {
  if (argc > 1 && argv[1][0] == '-') {  // -h, --help
    std::printf("usage: %s [devices (2)] [epochs (1)]: a convnet on Fashion-MNIST, data-parallel\n", argv[0]);
    return 0;
  }
  const int devices = argc > 1 ? std::atoi(argv[1]) : 2;
  const int epochs = argc > 2 ? std::atoi(argv[2]) : 1;
  const int batch_size = 128;  // global: each device trains on its slice of every batch
  const int batch_per_device = BatchPerDevice(batch_size, devices);  // throws unless it divides evenly

  ParallelOptions options;
  for (int d = 0; d < devices; ++d) options.devices.push_back(d);
  options.input_builder = [](ModelHelper& model) {
    layers::ReadBatch(model, "train_reader", "data", "label");
  };
  options.forward_builder = [](ModelHelper& model, float loss_scale) {
    std::string logits = Classifier(model, model.Scoped("data"), /*is_test=*/false);
    auto [softmax, loss] = layers::SoftmaxWithLoss(model, logits, model.Scoped("label"), "softmax", "loss");
    layers::Accuracy(model, softmax, model.Scoped("label"), "accuracy");
    return std::vector<std::string>{layers::Scale(model, loss, "scaled_loss", loss_scale)};
  };
  options.param_update_builder = [](ModelHelper& model) {
    SgdOptions sgd;
    sgd.base_learning_rate = 0.05f;
    AddMomentumSgd(model, sgd);
  };
  ModelHelper train("train");
  DataParallelModel parallel = Parallelize(train, options);

  // The test net reads device 0's parameters: build it in device 0's name scope.
  ModelHelper test("test", /*init_params=*/false);
  ModelHelper::NameScope scope(test, parallel.scopes[0]);
  std::string accuracy = layers::Accuracy(test, Classifier(test, test.Scoped("test_data"), true),
                                          test.Scoped("test_label"), "test_accuracy");

  auto train_data = std::make_shared<ImageDataset>(LoadFashionMnist(/*train=*/true));
  DatasetSource test_data(std::make_shared<ImageDataset>(LoadFashionMnist(/*train=*/false)), false, 0);
  Workspace ws;
  ws.SetObject("train_reader",
               std::make_shared<BatchReader>(std::make_shared<DatasetSource>(train_data, true, 1),
                                             batch_per_device, devices));
  ws.RunNetOnce(train.param_init_net());  // ends with the broadcast of device 0's parameters
  Net* train_net = ws.CreateNet(train.net());
  Net* test_net = ws.CreateNet(test.net());

  const int64_t steps = train_data->size() / batch_size;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    for (int64_t step = 1; step <= steps; ++step) {
      train_net->Run();
      if (step % 100 == 0)
        std::printf("epoch %d step %lld: loss %.4f, accuracy %.3f (device 0)\n", epoch,
                    static_cast<long long>(step), ws.Blob(parallel.scopes[0] + "loss").data<float>()[0],
                    ws.Blob(parallel.scopes[0] + "accuracy").data<float>()[0]);
    }
    double correct = 0;
    for (int64_t first = 0; first < test_data.size(); first += 1000) {
      test_data.Fill(first, 1000, ws.CreateBlob(test.Scoped("test_data")),
                     ws.CreateBlob(test.Scoped("test_label")));
      test_net->Run();
      correct += ws.Blob(accuracy).data<float>()[0] * 1000;
    }
    std::printf("epoch %d: test accuracy %.4f\n", epoch, correct / test_data.size());
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
