#!/usr/bin/env python3
"""The example of Caffe2's "Synchronous SGD" programming guide: ResNet-50 from three builder functions,
replicated by data_parallel_model.Parallelize_GPU over `--gpus` (CPU devices where the machine has no GPU),
gradient memory optimized. Prints the loss and images/s every `--log_every` steps.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/resnet50_data_parallel.py --gpus 0,1 \\
        --batch_size 16 --iterations 6
"""
import argparse
import time

from lockstep import brew, data_parallel_model, model_helper, models, optimizer, workspace


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", default="0,1", help="device ids (default 0,1)")
    parser.add_argument("--train_data", default="null",
                        help="a database path, fashion-mnist, or null for synthetic images (default)")
    parser.add_argument("--db_type", default="lmdb", help="lmdb or leveldb (default lmdb)")
    parser.add_argument("--batch_size", type=int, default=32, help="global batch (default 32)")
    parser.add_argument("--image_size", type=int, default=224, help="(default 224)")
    parser.add_argument("--num_labels", type=int, default=1000, help="(default 1000)")
    parser.add_argument("--base_learning_rate", type=float, default=0.1, help="(default 0.1)")
    parser.add_argument("--iterations", type=int, default=10, help="steps to train (default 10)")
    parser.add_argument("--log_every", type=int, default=2, help="steps between progress lines (default 2)")
    args = parser.parse_args()
    gpus = [int(g) for g in args.gpus.split(",")]

    train_model = model_helper.ModelHelper(name="resnet50")
    # Every device reads its own slice of each global batch from the one reader.
    train_model.param_init_net.CreateDB([], "reader", db=args.train_data, db_type=args.db_type,
                                        batch_size=args.batch_size // len(gpus), num_replicas=len(gpus),
                                        image_size=args.image_size, num_labels=args.num_labels)

    def add_image_input(model):
        brew.image_input(model, "reader", ["data", "label"])

    def create_resnet50_model_ops(model, loss_scale):
        pred = models.create_resnet50(model, "data", num_input_channels=3, num_labels=args.num_labels,
                                      image_size=args.image_size, no_bias=True)
        softmax, loss = brew.softmax_with_loss(model, [pred, "label"], ["softmax", "loss"])
        brew.accuracy(model, [softmax, "label"], "accuracy")
        return [brew.scale(model, loss, "scaled_loss", scale=loss_scale)]

    def add_parameter_update_ops(model):
        optimizer.add_weight_decay(model, 1e-4)
        optimizer.build_sgd(model, base_learning_rate=args.base_learning_rate, momentum=0.9, nesterov=True,
                            policy="step", stepsize=1000, gamma=0.1)

    data_parallel_model.Parallelize_GPU(
        train_model,
        input_builder_fun=add_image_input,
        forward_pass_builder_fun=create_resnet50_model_ops,
        param_update_builder_fun=add_parameter_update_ops,
        devices=gpus,  # list of integers such as [0, 1, 2, 3]
        optimize_gradient_memory=True,
    )
    first = data_parallel_model.GetDeviceScopes(train_model)[0]
    workspace.RunNetOnce(train_model.param_init_net)
    workspace.CreateNet(train_model.net)

    done = 0
    while done < args.iterations:
        steps = min(args.log_every, args.iterations - done)
        start = time.perf_counter()
        workspace.RunNet(train_model.net, steps)
        seconds = time.perf_counter() - start
        done += steps
        print(f"step {done}/{args.iterations}: loss {float(workspace.FetchBlob(first + 'loss')):.4f}, "
              f"{steps * args.batch_size / seconds:.1f} img/s", flush=True)
    # A checkpoint holds the first device's parameters: model.GetParams("cpu_0") or GetCheckpointParams.
    print(f"{len(train_model.GetParams(first))} parameters per device, e.g. {train_model.GetParams(first)[0]}")


if __name__ == "__main__":
    main()
