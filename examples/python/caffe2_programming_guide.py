#!/usr/bin/env python3
"""The example of Caffe2's "Synchronous SGD" programming guide as a Caffe2 program: `from caffe2.python import
data_parallel_model, model_helper` and the three builder functions written against Caffe2's modules, which the
`caffe2` package runs on lockstep. ResNet-50 over `--gpus` (CPU devices where the machine has no GPU), on
synthetic images (`--train_data null`) or a database made by `lockstep make-db`.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/caffe2_programming_guide.py --gpus 0,1 \\
        --batch_size 8 --image_size 64 --iterations 4
"""
import argparse

from caffe2.python import brew, core, data_parallel_model, model_helper, optimizer, workspace
import caffe2.python.models.resnet as resnet


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", default="0,1", help="device ids (default 0,1)")
    parser.add_argument("--train_data", default="null", help="a database path, or null for synthetic images")
    parser.add_argument("--db_type", default="lmdb", help="lmdb or leveldb (default lmdb)")
    parser.add_argument("--batch_size", type=int, default=32, help="global batch (default 32)")
    parser.add_argument("--image_size", type=int, default=224, help="(default 224)")
    parser.add_argument("--num_labels", type=int, default=1000, help="(default 1000)")
    parser.add_argument("--iterations", type=int, default=10, help="steps to train (default 10)")
    args = parser.parse_args()
    gpus = [int(g) for g in args.gpus.split(",")]
    batch_per_device = args.batch_size // len(gpus)

    train_model = model_helper.ModelHelper(name="resnet50")
    if args.train_data != "null":
        reader = train_model.CreateDB("reader", db=args.train_data, db_type=args.db_type)

    def add_image_input(model):
        if args.train_data == "null":
            model.param_init_net.GaussianFill([], "data", shape=[batch_per_device, 3, args.image_size,
                                                                 args.image_size])
            model.param_init_net.ConstantFill([], "label", shape=[batch_per_device], value=1,
                                              dtype=core.DataType.INT32)
        else:  # every device reads its own slice of each batch from the one reader
            brew.image_input(model, reader, ["data", "label"], batch_size=batch_per_device,
                             use_caffe_datum=True, scale=args.image_size, crop=args.image_size, mirror=1)

    def create_resnet50_model_ops(model, loss_scale):
        pred = resnet.create_resnet50(model, "data", num_input_channels=3, num_labels=args.num_labels,
                                      no_bias=True, no_loss=True)
        softmax, loss = model.SoftmaxWithLoss([pred, "label"], ["softmax", "loss"])
        brew.accuracy(model, [softmax, "label"], "accuracy")
        return [model.Scale(loss, scale=loss_scale)]

    def add_parameter_update_ops(model):
        optimizer.add_weight_decay(model, 1e-4)
        optimizer.build_sgd(model, base_learning_rate=0.1, momentum=0.9, policy="step", stepsize=1000, gamma=0.1)

    data_parallel_model.Parallelize_GPU(
        train_model,
        input_builder_fun=add_image_input,
        forward_pass_builder_fun=create_resnet50_model_ops,
        param_update_builder_fun=add_parameter_update_ops,
        devices=gpus,  # list of integers such as [0, 1, 2, 3]
        optimize_gradient_memory=True,
    )
    workspace.RunNetOnce(train_model.param_init_net)
    workspace.CreateNet(train_model.net)
    first = f"{train_model._device_prefix}_{gpus[0]}"
    for step in range(1, args.iterations + 1):
        workspace.RunNet(train_model.net.Proto().name)
        print(f"step {step}/{args.iterations}: loss {float(workspace.FetchBlob(first + '/loss')):.4f}", flush=True)
    # To checkpoint the model, take the parameters of the first device: GetParams("gpu_0") (or "cpu_0").
    print(f"{len(train_model.GetParams(first))} parameters per device, e.g. {train_model.GetParams(first)[0]}")


if __name__ == "__main__":
    main()
