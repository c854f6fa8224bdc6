#!/usr/bin/env python3
"""The d2l "Training on Multiple GPUs" chapter with Caffe2's data_parallel_model: LeNet on Fashion-MNIST,
batch 256 split over two devices, learning rate 0.2, 10 epochs, test accuracy after each epoch.

The model is written as the three builder functions of the Caffe2 programming guide; Parallelize_GPU runs it
on CPU devices where the machine has no GPU. Example:

    PYTHONPATH=build/python /usr/bin/python3 examples/python/lenet_data_parallel.py --devices 0,1
"""
import argparse
import time

from lockstep import (brew, checkpoint, core, data_parallel_model, mixed_precision, model_helper, optimizer,
                      workspace)
from lockstep._core import C

GAUSSIAN = ("GaussianFill", {"std": 0.01})
TEST_IMAGES = 10000  # Fashion-MNIST's test set
TEST_BATCH = 500


def lenet(model, data, is_test=False):
    """conv 20@3x3, relu, avgpool 2, conv 50@5x5, relu, avgpool 2, fc 128, relu, fc 10 (28x28 inputs)."""
    x = brew.conv(model, data, "conv1", 1, 20, 3, weight_init=GAUSSIAN)
    x = brew.relu(model, x, "relu1")
    x = brew.average_pool(model, x, "pool1", kernel=2, stride=2)
    x = brew.conv(model, x, "conv2", 20, 50, 5, weight_init=GAUSSIAN)
    x = brew.relu(model, x, "relu2")
    x = brew.average_pool(model, x, "pool2", kernel=2, stride=2)
    x = brew.fc(model, x, "fc3", 50 * 4 * 4, 128, weight_init=GAUSSIAN)
    x = brew.relu(model, x, "relu3")
    return brew.fc(model, x, "fc4", 128, 10, weight_init=GAUSSIAN)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", default="0,1", help="device ids (default 0,1)")
    parser.add_argument("--batch_size", type=int, default=256, help="global batch (default 256)")
    parser.add_argument("--lr", type=float, default=0.2, help="learning rate (default 0.2)")
    parser.add_argument("--num_epochs", type=int, default=10, help="epochs (default 10)")
    parser.add_argument("--steps", type=int, default=0, help="stop after this many steps (default: epochs)")
    parser.add_argument("--seed", type=int, default=1, help="initialisation and data order (default 1)")
    parser.add_argument("--save", default="", help="write a checkpoint here at the end")
    parser.add_argument("--dtype", default="float", choices=("float", "bfloat16", "float16"),
                        help="what the network computes in; parameters and updates stay float32 (default float)")
    args = parser.parse_args()
    devices = [int(d) for d in args.devices.split(",")]
    if args.batch_size < len(devices) or args.batch_size % len(devices):
        parser.error(f"--batch_size {args.batch_size} does not divide evenly among {len(devices)} devices")
    batch_per_device = args.batch_size // len(devices)

    train_model = model_helper.ModelHelper(name="lenet", seed=args.seed)
    # One reader serves every device: each reads its own slice of each global batch.
    train_model.param_init_net.CreateDB([], "train_reader", db="fashion-mnist", batch_size=batch_per_device,
                                        num_replicas=len(devices), seed=args.seed)

    def add_input(model):
        brew.image_input(model, "train_reader", ["data", "label"])

    def create_lenet_ops(model, loss_scale):
        if args.dtype == "float":
            logits = lenet(model, "data")
        else:
            logits = mixed_precision.compute_in(model, args.dtype, "data", lambda: lenet(model, "data"))
        softmax, loss = brew.softmax_with_loss(model, [logits, "label"], ["softmax", "loss"])
        brew.accuracy(model, [softmax, "label"], "accuracy")
        return [brew.scale(model, loss, "scaled_loss", scale=loss_scale)]

    def add_parameter_update_ops(model):
        optimizer.build_multi_precision_sgd(model, base_learning_rate=args.lr, momentum=0.0, weight_decay=0.0)

    data_parallel_model.Parallelize_GPU(
        train_model,
        input_builder_fun=add_input,
        forward_pass_builder_fun=create_lenet_ops,
        param_update_builder_fun=add_parameter_update_ops,
        devices=devices,
        optimize_gradient_memory=False,
    )
    first_scope = data_parallel_model.GetDeviceScopes(train_model)[0]

    # Evaluation on the first device's parameters, in file order.
    test_model = model_helper.ModelHelper(name="lenet_test", init_params=False)
    test_model.param_init_net.CreateDB([], "test_reader", db="fashion-mnist", batch_size=TEST_BATCH, train=0)
    device = core.DeviceOption(data_parallel_model.GetDeviceType(train_model), devices[0])
    with core.DeviceScope(device), core.NameScope(first_scope):
        data, label = brew.image_input(test_model, "test_reader", ["test_data", "test_label"])
        brew.accuracy(test_model, [lenet(test_model, data, is_test=True), label], "test_accuracy")

    workspace.RunNetOnce(train_model.param_init_net)
    workspace.RunNetOnce(test_model.param_init_net)
    workspace.CreateNet(train_model.net)
    workspace.CreateNet(test_model.net)

    def test_accuracy():
        workspace.RunNetOnce(test_model.param_init_net)  # the test set from its first image
        total = 0.0
        for _ in range(TEST_IMAGES // TEST_BATCH):
            workspace.RunNet(test_model.net)
            total += float(workspace.FetchBlob(first_scope + "test_accuracy"))
        return total / (TEST_IMAGES // TEST_BATCH)

    iterations = C.limit_steps_per_epoch(60000 // args.batch_size)
    steps_left = args.steps or args.num_epochs * iterations
    epoch, steps_done = 0, 0
    while steps_left > 0:
        steps = min(iterations, steps_left)
        start = time.time()
        workspace.RunNet(train_model.net, steps)
        seconds = time.time() - start
        steps_left -= steps
        steps_done += steps
        epoch += 1
        loss = float(workspace.FetchBlob(first_scope + "loss"))
        print(f"epoch {epoch}: {steps} steps, {steps * args.batch_size / seconds:.1f} img/s, loss {loss:.4f}, "
              f"test accuracy {test_accuracy():.4f}", flush=True)
    if args.save:
        # The layers above are the zoo's LeNet: with its name and the geometry, `lockstep eval` and `lockstep
        # export` rebuild the model from the file alone.
        checkpoint.save(args.save, train_model, model_name="lenet", epochs_done=epoch,
                        reader_position=steps_done * args.batch_size, num_channels=1, image_size=28, num_labels=10)
        print(f"saved checkpoint {args.save}")


if __name__ == "__main__":
    main()
