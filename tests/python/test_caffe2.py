"""The `caffe2` package over lockstep: the calls of Caffe2's resnet50_trainer and of its programming guide's
example, as Caffe2 programs make them (module names, arguments, protobuf messages), and one-line refusals of
what lockstep does not do. Run with build/python on PYTHONPATH."""
import os
import subprocess
import sys
import types

import numpy as np
import pytest

from caffe2.proto import caffe2_pb2
from caffe2.python import (brew, cnn, core, data_parallel_model, data_parallel_model_utils, dyndep,
                           experiment_util, model_helper, optimizer, timeout_guard, workspace)
from caffe2.python._unsupported import Unsupported
from caffe2.python.modeling.initializers import Initializer, PseudoFP16Initializer
from caffe2.python.predictor_constants import predictor_constants
import caffe2.python.models.resnet as resnet
import caffe2.python.predictor.predictor_exporter as pred_exp
import caffe2.python.predictor.predictor_py_utils as pred_utils
from lockstep._core import InvalidInput

BATCH_PER_DEVICE, IMAGE, LABELS = 4, 8, 5


@pytest.fixture(autouse=True)
def fresh_workspace():
    workspace.ResetWorkspace()
    yield
    workspace.ResetWorkspace()


def test_protos_constants_and_device_options():
    assert (caffe2_pb2.CPU, caffe2_pb2.CUDA) == (0, 1) and core.CPU == caffe2_pb2.CPU
    option = core.DeviceOption(caffe2_pb2.CPU, 0)
    assert isinstance(option, caffe2_pb2.DeviceOption) and option.device_type == caffe2_pb2.CPU
    assert core.DeviceOption(caffe2_pb2.CUDA, device_id=3).device_id == 3  # later Caffe2's name
    assert core.GlobalInit(["caffe2"]) and workspace.has_hip_support is False
    net = caffe2_pb2.NetDef(name="n", op=[caffe2_pb2.OperatorDef(type="Relu", input=["x"], output=["y"])])
    assert caffe2_pb2.NetDef.FromString(net.SerializeToString()) == net
    assert core.DataType.INT32 == caffe2_pb2.TensorProto.INT32 and core.DataType.FLOAT == 1
    assert isinstance(workspace.has_gpu_support, bool) and workspace.GpuDeviceType == caffe2_pb2.CUDA
    assert workspace.NumCudaDevices() == workspace.NumGpuDevices() >= 0
    assert workspace.GlobalInit(["caffe2", "--caffe2_log_level=2"])
    assert dyndep.InitOpsLibrary("@/caffe2/caffe2/distributed:file_store_handler_ops") is None


def test_create_operator_run_operator_once_and_feed_fetch():
    op = core.CreateOperator("ConstantFill", [], ["label"], shape=[3], value=1, dtype=core.DataType.INT32,
                             device_option=core.DeviceOption(caffe2_pb2.CPU, 0))
    assert op.type == "ConstantFill" and list(op.output) == ["label"] and op.device_option.device_type == 0
    assert workspace.RunOperatorOnce(op)
    label = workspace.FetchBlob("label")
    assert label.dtype == np.int32 and label.tolist() == [1, 1, 1]
    workspace.FeedBlob("x", np.arange(4, dtype=np.float32), device_option=core.DeviceOption(caffe2_pb2.CPU, 0))
    assert workspace.HasBlob("x") and {"x", "label"} <= set(workspace.Blobs())
    workspace.ResetWorkspace()
    assert not workspace.HasBlob("x")


def test_standalone_net_scopes_names_and_runs_created():
    net = core.Net("init")
    with core.NameScope("cpu_0"), core.DeviceScope(core.DeviceOption(caffe2_pb2.CPU, 0)):
        filled = net.ConstantFill([], "ones", shape=[2], value=1.0)
        scaled = net.Scale(filled, "twice", scale=2.0)
        assert core.ScopedBlobReference("w") == "cpu_0/w"
    assert (filled, scaled) == ("cpu_0/ones", "cpu_0/twice")
    assert net.Proto().op[1].input == ["cpu_0/ones"]  # a BlobReference is not scoped again
    assert workspace.RunNetOnce(net)
    np.testing.assert_array_equal(workspace.FetchBlob("cpu_0/twice"), [2.0, 2.0])
    step = core.Net(caffe2_pb2.NetDef(name="step"))
    step.Scale(core.BlobReference("cpu_0/twice"), core.BlobReference("cpu_0/twice"), scale=3.0)
    workspace.CreateNet(step)
    workspace.RunNet("step", 2)
    np.testing.assert_array_equal(workspace.FetchBlob("cpu_0/twice"), [18.0, 18.0])
    relu = core.BlobReference("cpu_0/twice", step).Relu([], "cpu_0/relu")  # adds to the net it is given
    assert relu == "cpu_0/relu" and step.Proto().op[-1].type == "Relu"
    assert list(step.Proto().op[-1].input) == ["cpu_0/twice"]
    step.RunAllOnGPU()  # no GPU here: the operators stay on CPU, as Parallelize_GPU's replicas do
    assert workspace.NumCudaDevices() > 0 or not step.Proto().op[0].HasField("device_option")


def add_null_input(model):
    """The trainer's AddNullInput: Gaussian images and a constant label, filled once."""
    model.param_init_net.GaussianFill([], ["data"], shape=[BATCH_PER_DEVICE, 3, IMAGE, IMAGE])
    model.param_init_net.ConstantFill([], ["label"], shape=[BATCH_PER_DEVICE], value=1,
                                      dtype=core.DataType.INT32)


def create_model_ops(model, loss_scale):
    with brew.arg_scope([brew.conv, brew.fc], WeightInitializer=Initializer, BiasInitializer=Initializer,
                        enable_tensor_core=False, float16_compute=False):
        x = brew.conv(model, "data", "conv1", 3, 4, 3, pad=1)
        x = brew.spatial_bn(model, x, "conv1_bn", 4, epsilon=1e-3, momentum=0.1, is_test=False)
        x = brew.relu(model, x, "relu1")
        x = brew.average_pool(model, x, "pool1", kernel=2, stride=2)
        pred = brew.fc(model, x, "pred", 4 * (IMAGE // 2) ** 2, LABELS)
    softmax, loss = model.SoftmaxWithLoss([pred, "label"], ["softmax", "loss"])
    loss = model.Scale(loss, scale=loss_scale)
    brew.accuracy(model, [softmax, "label"], "accuracy")
    return [loss]


def add_optimizer(model):
    optimizer.add_weight_decay(model, 1e-4)
    return optimizer.build_multi_precision_sgd(model, 0.1, momentum=0.9, nesterov=1, policy="step",
                                               stepsize=100, gamma=0.1)


def add_post_sync_ops(model):
    for param_info in model.GetOptimizationParamInfo(model.GetParams()):
        assert param_info.blob_copy is None and param_info.grad is not None
        if param_info.blob_copy is not None:
            model.param_init_net.HalfToFloat(param_info.blob, param_info.blob_copy[core.DataType.FLOAT])


def trainer_model(devices=(0, 1), name="resnet50"):
    """The trainer's Parallelize call on CPU devices, with a small network."""
    arg_scope = {"order": "NCHW", "use_cudnn": True, "cudnn_exhaustive_search": True, "ws_nbytes_limit": 1 << 26}
    model = model_helper.ModelHelper(name=name, arg_scope=arg_scope)
    data_parallel_model.Parallelize(
        model, input_builder_fun=add_null_input, forward_pass_builder_fun=create_model_ops,
        optimizer_builder_fun=add_optimizer, post_sync_builder_fun=add_post_sync_ops, devices=list(devices),
        rendezvous=None, optimize_gradient_memory=False, cpu_device=True, shared_model=True,
        combine_spatial_bn=True)
    data_parallel_model.OptimizeGradientMemory(model, {}, set(), False)
    workspace.RunNetOnce(model.param_init_net)
    workspace.CreateNet(model.net)
    return model


def test_trainer_calls_train_replicas_that_stay_equal():
    model = trainer_model()
    assert (model._device_prefix, model._devices, model._device_type) == ("cpu", [0, 1], caffe2_pb2.CPU)
    for _ in range(3):
        workspace.RunNet(model.net.Proto().name)
    loss, accuracy = workspace.FetchBlob("cpu_0/loss"), workspace.FetchBlob("cpu_0/accuracy")
    assert np.isfinite(loss).all() and 0.0 <= float(accuracy.reshape(-1)[0]) <= 1.0
    params = data_parallel_model.GetCheckpointParams(model)
    assert params and all(p.startswith("cpu_0/") for p in params) and "cpu_0/conv1_w" in params
    for param in model.GetParams("cpu_0"):
        np.testing.assert_array_equal(workspace.FetchBlob(param), workspace.FetchBlob(param.replace("cpu_0", "cpu_1")))
    # shared_model: the second device's parameters are views of the first's, and only the first updates
    changed = workspace.FetchBlob("cpu_0/conv1_w") + 1
    workspace.FeedBlob("cpu_0/conv1_w", changed)
    np.testing.assert_array_equal(workspace.FetchBlob("cpu_1/conv1_w"), changed)
    rates = data_parallel_model.GetLearningRateBlobNames(model)
    assert len(rates) == 1 and rates[0].startswith("cpu_0/")
    assert float(workspace.FetchBlob(rates[0]).reshape(-1)[0]) == pytest.approx(0.1)
    activations = data_parallel_model_utils.GetActivationBlobs(model)
    assert any(a.startswith("cpu_0/relu1") for a in activations) and "cpu_0/conv1_w" not in activations
    assert all(a.startswith("cpu_0/") for a in activations)


def test_workspaces_by_name_and_blobs_as_a_mapping_as_in_the_basics_tutorial():
    assert workspace.CurrentWorkspace() == "default"
    workspace.blobs["x"] = np.arange(3, dtype=np.float32)
    with pytest.raises(InvalidInput, match="no workspace 'gutentag'.*create_if_missing=True"):
        workspace.SwitchWorkspace("gutentag")
    workspace.SwitchWorkspace("gutentag", True)
    try:
        assert workspace.CurrentWorkspace() == "gutentag" and "x" not in workspace.blobs
        workspace.FeedBlob("y", np.ones(2, np.float32))
        assert list(workspace.blobs) == ["y"] and len(workspace.blobs) == 1
        assert "gutentag" in workspace.Workspaces() and "default" in workspace.Workspaces()
    finally:
        workspace.SwitchWorkspace("default")
    np.testing.assert_array_equal(workspace.blobs["x"], [0.0, 1.0, 2.0])
    assert not workspace.HasBlob("y")
    workspace.ResetWorkspace()  # the current one only
    assert "x" not in workspace.blobs
    workspace.SwitchWorkspace("gutentag")
    try:
        assert workspace.HasBlob("y")
    finally:
        workspace.SwitchWorkspace("default")


def test_parallelize_inside_a_gpu_device_scope_is_caffe2s_assertion():
    with core.DeviceScope(core.DeviceOption(caffe2_pb2.CUDA, 0)):
        with pytest.raises(AssertionError, match="Parallelize must be called without device-scope"):
            data_parallel_model.Parallelize_GPU(None, None, None)


def test_add_blob_sync_copies_the_first_replicas_blob_to_the_others():
    model = model_helper.ModelHelper(name="sync")
    data_parallel_model.Parallelize_CPU(model, input_builder_fun=add_null_input,
                                        forward_pass_builder_fun=create_model_ops, devices=[0, 1])
    data_parallel_model.AddBlobSync(model, ["counts"])
    with pytest.raises(Unsupported, match="unprefixed blob names, not cpu_0/counts"):
        data_parallel_model.AddBlobSync(model, ["cpu_0/counts"])
    workspace.FeedBlob("cpu_0/counts", np.arange(3, dtype=np.float32))
    workspace.FeedBlob("cpu_1/counts", np.zeros(3, np.float32))
    data_parallel_model.RunInitNet(model)
    data_parallel_model.RunNet(model, 1)
    np.testing.assert_array_equal(workspace.FetchBlob("cpu_1/counts"), [0.0, 1.0, 2.0])
    # One device: nothing to copy, and nothing is added.
    single = model_helper.ModelHelper(name="sync_one")
    data_parallel_model.Parallelize_CPU(single, input_builder_fun=add_null_input,
                                        forward_pass_builder_fun=create_model_ops, devices=[0])
    ops = len(single.net.Proto().op)
    data_parallel_model.AddBlobSync(single, ["counts"])
    assert len(single.net.Proto().op) == ops


def test_seed_example_parallelize_gpu_with_guide_arguments():
    """The programming guide's call: Parallelize_GPU with the three builders (CPU devices without a GPU)."""
    train_model = model_helper.ModelHelper(name="resnet50")

    def add_parameter_update_ops(model):
        optimizer.build_sgd(model, base_learning_rate=0.1, momentum=0.9)

    data_parallel_model.Parallelize_GPU(train_model, input_builder_fun=add_null_input,
                                        forward_pass_builder_fun=create_model_ops,
                                        param_update_builder_fun=add_parameter_update_ops, devices=[0, 1],
                                        optimize_gradient_memory=True)
    data_parallel_model.RunInitNet(train_model)
    data_parallel_model.RunNet(train_model, 2)
    prefix = "gpu" if workspace.NumCudaDevices() else "cpu"
    assert train_model.GetParams(f"{prefix}_0") and np.isfinite(workspace.FetchBlob(f"{prefix}_0/loss")).all()
    data_parallel_model.Synchronize(train_model)


def save_model(model, path):
    """The trainer's SaveModel, whose input and output names miss the device ("[]_cpu/data"): the null input's
    data, filled by param_init_net, is among the checkpoint's blobs, as in Caffe2."""
    prefix = "[]_{}".format(model._device_prefix, model._devices[0])
    meta = pred_exp.PredictorExportMeta(
        predict_net=model.net.Proto(), parameters=data_parallel_model.GetCheckpointParams(model),
        inputs=[prefix + "/data"], outputs=[prefix + "/softmax"],
        shapes={prefix + "/softmax": (1, LABELS), prefix + "/data": (3, IMAGE, IMAGE)})
    pred_exp.save_to_db(db_type="minidb", db_destination=str(path), predictor_export_meta=meta)


def load_model(path):
    """The trainer's LoadModel."""
    meta_net_def = pred_exp.load_from_db(str(path), "minidb")
    init_net = core.Net(pred_utils.GetNet(meta_net_def, predictor_constants.GLOBAL_INIT_NET_TYPE))
    predict_init_net = core.Net(pred_utils.GetNet(meta_net_def, predictor_constants.PREDICT_INIT_NET_TYPE))
    predict_init_net.RunAllOnGPU()
    init_net.RunAllOnGPU()
    assert workspace.RunNetOnce(predict_init_net)
    assert workspace.RunNetOnce(init_net)
    itercnt = workspace.FetchBlob("optimizer_iteration")
    workspace.FeedBlob("optimizer_iteration", itercnt, device_option=core.DeviceOption(caffe2_pb2.CPU, 0))
    return itercnt


def test_saved_model_loads_back_and_resumes(tmp_path):
    model = trainer_model()
    for _ in range(2):
        workspace.RunNet(model.net.Proto().name)
    save_model(model, tmp_path / "resnet50_model_1.mdl")
    saved = {p: workspace.FetchBlob(p) for p in data_parallel_model.GetCheckpointParams(model)}
    workspace.RunNet(model.net.Proto().name)
    after_three = {p: workspace.FetchBlob(p) for p in saved}

    workspace.ResetWorkspace()
    model = trainer_model()
    assert int(load_model(tmp_path / "resnet50_model_1.mdl").reshape(-1)[0]) == 2
    data_parallel_model.FinalizeAfterCheckpoint(model)
    for name, value in saved.items():
        np.testing.assert_array_equal(workspace.FetchBlob(name), value)
        np.testing.assert_array_equal(workspace.FetchBlob(name.replace("cpu_0", "cpu_1")), value)
    workspace.RunNet(model.net.Proto().name)  # the third step again, from the loaded state
    for name, value in after_three.items():
        np.testing.assert_allclose(workspace.FetchBlob(name), value, rtol=0, atol=1e-6)


def test_prediction_net_saved_and_prepared_predicts_the_same(tmp_path):
    model = model_helper.ModelHelper(name="predict")
    brew.fc(model, "data", "out", 6, 3, weight_init=("GaussianFill", {"std": 1.0}))
    workspace.RunNetOnce(model.param_init_net)
    data = np.random.RandomState(0).randn(2, 6).astype(np.float32)
    workspace.FeedBlob("data", data)
    workspace.RunNetOnce(model.net)
    expected = workspace.FetchBlob("out")
    meta = pred_exp.PredictorExportMeta(predict_net=model.net.Proto(), parameters=model.params, inputs=["data"],
                                        outputs=["out"], shapes={"data": (2, 6), "out": (2, 3)})
    pred_exp.save_to_db("minidb", str(tmp_path / "fc.mdl"), meta)

    workspace.ResetWorkspace()
    predict_net = pred_exp.prepare_prediction_net(str(tmp_path / "fc.mdl"), "minidb")
    meta_net_def = pred_exp.load_from_db(str(tmp_path / "fc.mdl"), "minidb")
    assert pred_utils.GetBlobs(meta_net_def, predictor_constants.INPUTS_BLOB_TYPE) == ["data"]
    assert pred_utils.GetBlobs(meta_net_def, predictor_constants.PARAMETERS_BLOB_TYPE) == ["out_w", "out_b"]
    workspace.FeedBlob("data", data)
    workspace.RunNet(predict_net.Proto().name)
    np.testing.assert_array_equal(workspace.FetchBlob("out"), expected)


def test_model_trainer_log_writes_caffe2_name_and_columns(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = types.SimpleNamespace(batch_size=4)
    log = experiment_util.ModelTrainerLog("resnet50_gpu2_b4_L5_lr0.10_v2", args)
    log.log(input_count=8, batch_count=2, additional_values={
        "accuracy": np.array([0.5], np.float32), "loss": np.array(1.25, np.float32), "learning_rate": 0.1,
        "epoch": 1, "test_accuracy": -1})
    log.log(input_count=24, batch_count=6, additional_values={
        "accuracy": 0.75, "loss": 0.5, "learning_rate": 0.1, "epoch": 2, "test_accuracy": -1})
    (name,) = os.listdir(tmp_path)
    assert name.startswith("resnet50_gpu2_b4_L5_lr0.10_v2_") and name.endswith(".log") and len(name) == 49
    lines = (tmp_path / name).read_text().splitlines()
    assert lines[0] == "# namespace(batch_size=4)"
    assert lines[1] == ("time_spent,cumulative_time_spent,input_count,cumulative_input_count,"
                        "cumulative_batch_count,inputs_per_sec,accuracy,epoch,learning_rate,loss,test_accuracy")
    rows = [line.split(",") for line in lines[2:]]
    assert [(r[2], r[3], r[4], r[7]) for r in rows] == [("8", "8", "2", "1"), ("16", "24", "6", "2")]
    assert float(rows[0][6]) == 0.5 and float(rows[0][9]) == 1.25 and float(rows[1][10]) == -1
    with pytest.raises(Unsupported, match="columns top5"):
        log.log(input_count=30, batch_count=7, additional_values={"top5": 1.0})


def test_timeout_guard_passes_a_quick_block_and_ends_a_stalled_one():
    with timeout_guard.CompleteInTimeOrDie(60):
        pass
    program = "import time; from caffe2.python import timeout_guard\n" \
              "with timeout_guard.CompleteInTimeOrDie(0.2):\n    time.sleep(60)\n"
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=50)
    assert result.returncode == 1 and "did not complete in 0.2 s" in result.stderr


def test_resnet50_builds_as_caffe2s_create_resnet50():
    model = model_helper.ModelHelper(name="resnet50")
    with core.NameScope("cpu_0"):
        pred = resnet.create_resnet50(model, "data", num_input_channels=3, num_labels=10, no_bias=True,
                                      no_loss=True)
        assert pred.startswith("cpu_0/") and model.net.Proto().op[-1].type == "FC"
        softmax, loss = resnet.create_resnet50(cnn.CNNModelHelper(name="r"), "data", 3, 10, label="label")
    assert (softmax, loss) == ("cpu_0/softmax", "cpu_0/loss")
    assert len(model.GetParams("cpu_0")) == 161  # 53 convolutions and batch norms (w, scale, bias) and the FC
    with pytest.raises(Unsupported, match="conv1_kernel=3"):
        resnet.create_resnet50(model, "data", 3, 10, conv1_kernel=3, no_loss=True)
    # Caffe2's trainer with --dtype float16 scopes float16 initializers around it: refused, not dropped.
    with brew.arg_scope([brew.conv, brew.fc], WeightInitializer=PseudoFP16Initializer, float16_compute=True):
        with pytest.raises(Unsupported, match=r"inside brew.arg_scope\(WeightInitializer, float16_compute\)"):
            resnet.create_resnet50(model_helper.ModelHelper(name="half"), "data", 3, 10, no_loss=True)
    with brew.arg_scope([brew.conv, brew.fc], WeightInitializer=Initializer, float16_compute=False):
        resnet.create_resnet50(model_helper.ModelHelper(name="float"), "data", 3, 10, no_loss=True)


def test_cnn_model_helper_layers_are_brews():
    model = cnn.CNNModelHelper(order="NCHW", name="cnn")
    x = model.Conv("data", "conv", 1, 2, 3, pad=1)
    x = model.Relu(x, "relu")
    model.FC(x, "fc", 2 * 4 * 4, 3)
    assert [op.type for op in model.net.Proto().op] == ["Conv", "Relu", "FC"]
    assert model.params == ["conv_w", "conv_b", "fc_w", "fc_b"]


def test_arg_scope_initializers_and_create_param_with_an_initializer():
    model = model_helper.ModelHelper(name="initializers")
    with brew.arg_scope([brew.conv], weight_init=("ConstantFill", {"value": 0.5})):
        brew.conv(model, "data", "scoped", 1, 2, 3)
        brew.conv(model, "data", "own", 1, 2, 3, weight_init=("ConstantFill", {"value": 0.25}))
    with brew.arg_scope([brew.fc], WeightInitializer=Initializer("ConstantFill", value=3.0)):
        brew.fc(model, "x", "fc", 2, 2)
    model.create_param("p", [3], Initializer("ConstantFill", value=2.0))
    model.create_param("stat", [2], Initializer("ConstantFill", value=1.0), tags=["COMPUTED_PARAM"])
    workspace.RunNetOnce(model.param_init_net)
    for blob, value in (("scoped_w", 0.5), ("own_w", 0.25), ("fc_w", 3.0), ("p", 2.0), ("stat", 1.0)):
        assert np.all(workspace.FetchBlob(blob) == value), blob
    assert "stat" not in model.GetParams() and "stat" in model.GetComputedParams()
    with pytest.raises(Unsupported, match="the Initializer names no fill operator"):
        model.create_param("q", [3], Initializer())


def test_brew_spatial_bn_takes_caffe2s_arguments_in_caffe2s_order():
    model = model_helper.ModelHelper(name="bn_init")
    brew.spatial_bn(model, "x", "bn", 2, 0.5, -1.0, epsilon=1e-3, is_test=True, order="NCHW")
    workspace.RunNetOnce(model.param_init_net)
    np.testing.assert_array_equal(workspace.FetchBlob("bn_s"), [0.5, 0.5])
    np.testing.assert_array_equal(workspace.FetchBlob("bn_b"), [-1.0, -1.0])
    (op,) = model.net.Proto().op
    assert [a.f for a in op.arg if a.name == "epsilon"] == [pytest.approx(1e-3)]
    with pytest.raises(Unsupported, match="brew.spatial_bn: ScaleInitializer is not supported"):
        brew.spatial_bn(model, "x", "bn2", 2, ScaleInitializer=Initializer("ConstantFill", value=1.0))
    with brew.arg_scope([brew.spatial_bn], init_scale=0.25, is_test=True):
        brew.spatial_bn(model, "x", "scoped", 2)
        with pytest.raises(Unsupported, match="brew.spatial_bn: BiasInitializer is not supported"):
            brew.spatial_bn(model, "x", "bn3", 2, 1.0, 0.0, None, Initializer("ConstantFill", value=1.0))
    workspace.RunNetOnce(model.param_init_net)
    np.testing.assert_array_equal(workspace.FetchBlob("scoped_s"), [0.25, 0.25])


def test_brew_softmax_as_the_mnist_tutorial_writes_it():
    model = model_helper.ModelHelper(name="tutorial")
    with core.NameScope("gpu_0"):
        pred = brew.fc(model, "data", "pred", 4, 3)
        softmax = brew.softmax(model, pred, "softmax")
    assert softmax == "gpu_0/softmax"
    assert [op.type for op in model.net.Proto().op] == ["FC", "Softmax"]
    workspace.RunNetOnce(model.param_init_net)
    workspace.FeedBlob("gpu_0/data", np.arange(8, dtype=np.float32).reshape(2, 4))
    workspace.RunNetOnce(model.net)
    np.testing.assert_allclose(workspace.FetchBlob("gpu_0/softmax").sum(axis=1), [1.0, 1.0], rtol=1e-6)
    with pytest.raises(InvalidInput, match="brew.softmax: unknown argument 'axes'"):
        brew.softmax(model, pred, "other", axes=1)


def test_convert_net_for_device_scopes_and_places_a_copy():
    net = core.Net("n")
    net.Relu("x", "y")
    converted = data_parallel_model.ConvertNetForDevice(net, core.DeviceOption(caffe2_pb2.CUDA, 1))
    op = converted.Proto().op[0]
    assert (list(op.input), list(op.output), op.device_option.device_id) == (["gpu_1/x"], ["gpu_1/y"], 1)
    assert list(net.Proto().op[0].input) == ["x"]
    assert converted.Proto().name == net.Proto().name  # a copy, as Caffe2's deepcopy


def test_store_handler_becomes_lockstep_rendezvous(tmp_path):
    workspace.RunOperatorOnce(core.CreateOperator("FileStoreHandlerCreate", [], ["store_handler"],
                                                  path=str(tmp_path), prefix="run7"))
    rendezvous = dict(kv_handler="store_handler", shard_id=1, num_shards=2, engine="GLOO", transport="tcp",
                      interface="", exit_nets=None)
    options = data_parallel_model._rendezvous(rendezvous, barrier_net_timeout_sec=30)
    assert options == dict(num_shards=2, shard_id=1, engine="GLOO", transport="tcp", first_iter_timeout=30,
                           file_store_path=str(tmp_path), run_id="run7")
    # Without a prefix, as Caffe2 allows: the run id the operator takes.
    workspace.RunOperatorOnce(core.CreateOperator("FileStoreHandlerCreate", [], ["no_prefix"], path=str(tmp_path)))
    options = data_parallel_model._rendezvous(dict(rendezvous, kv_handler="no_prefix"), barrier_net_timeout_sec=30)
    assert options["run_id"] == "default"
    with pytest.raises(Unsupported, match="mpi_rendezvous"):
        data_parallel_model._rendezvous(dict(rendezvous, kv_handler=None, mpi_rendezvous=True), None)
    with pytest.raises(Unsupported, match="kv_handler 'other'"):
        data_parallel_model._rendezvous(dict(rendezvous, kv_handler="other"), None)


def test_unsupported_features_stop_with_one_line_naming_them():
    model = model_helper.ModelHelper(name="m")
    refusals = [
        (lambda: data_parallel_model.Parallelize_BMUF(model), "Parallelize_BMUF"),
        (lambda: optimizer.build_sgd(model, 0.1, max_gradient_norm=1.0), "max_gradient_norm"),
        (lambda: optimizer.build_sgd(model, 0.1, sparse_dedup_aggregator="sum"), "sparse gradients"),
        (lambda: optimizer.build_fp16_sgd(model, 0.1), "build_fp16_sgd"),
        (lambda: optimizer.build_adam(model, 0.1), "build_adam"),
        (lambda: brew.fc(model, "x", "y", 2, 2, float16_compute=True), "float16_compute"),
        (lambda: brew.conv(model, "x", "y", 1, 1, 3, WeightInitializer=PseudoFP16Initializer),
         "PseudoFP16Initializer"),
        (lambda: data_parallel_model_utils.ShiftActivationDevices(model, [], {}), "ShiftActivationDevices"),
        (lambda: data_parallel_model.Parallelize(model, None, None, net_transformer_fun=lambda *a: None),
         "net transformer"),
        (lambda: workspace.RunPlan("plan"), "caffe2.python.workspace.RunPlan is not supported"),
        (lambda: brew.lrn, "caffe2.python.brew.lrn is not supported"),
        (lambda: __import__("caffe2.python.net_drawer"), "caffe2.python.net_drawer is not supported"),
        (lambda: __import__("caffe2.python.models.resnet", fromlist=["_"]).create_resnet_32x32,
         "caffe2.python.models.resnet.create_resnet_32x32 is not supported"),
        (lambda: __import__("caffe2.python.modeling.initializers", fromlist=["_"]).ExternalInitializer,
         "caffe2.python.modeling.initializers.ExternalInitializer is not supported"),
    ]
    for call, name in refusals:
        with pytest.raises(Unsupported) as refused:
            call()
        message = str(refused.value)
        assert name in message and "\n" not in message and message.startswith("caffe2 on lockstep: ")
    with pytest.raises(Unsupported, match="RNN cells"):
        import caffe2.python.rnn_cell  # noqa: F401
    with pytest.raises(AttributeError, match="no attribute or operator type 'NCCLAllreduce'"):
        model.net.NCCLAllreduce(["a", "b"], ["a", "b"])
    assert not hasattr(workspace, "_private") and workspace.has_hip_support is False


def test_refusal_ends_a_program_with_one_line():
    result = subprocess.run([sys.executable, "-c", "from caffe2.python import data_parallel_model as d\n"
                                                   "d.Parallelize_BMUF(None)"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 1 and result.stderr.count("\n") == 1 and "Parallelize_BMUF" in result.stderr


def write_cifar10_batch(path, count, labels):
    """``count`` random colour images in a CIFAR-10 binary batch (a label byte, then 32x32 RGB planes)."""
    rng = np.random.RandomState(3)
    records = [np.concatenate([[i % labels], rng.randint(0, 256, 3 * 32 * 32)]) for i in range(count)]
    path.write_bytes(np.array(records, np.uint8).tobytes())


def make_lmdb(tmp_path, count=32, labels=LABELS):
    """An LMDB of Caffe Datum records made by `lockstep make-db`."""
    cli = os.environ.get("LOCKSTEP_CLI_PATH")
    if not cli:
        pytest.skip("LOCKSTEP_CLI_PATH (the lockstep program) is not set; ctest sets it")
    write_cifar10_batch(tmp_path / "batch.bin", count, labels)
    db = str(tmp_path / "train_lmdb")
    subprocess.run([cli, "make-db", "--cifar10", str(tmp_path / "batch.bin"), "--output", db], check=True,
                   capture_output=True)
    return db


def test_image_input_reads_fashion_mnist_without_color():
    """Caffe2's trainer gives image_input no color, whose default asks for 3 channels: fashion-mnist has 1."""
    model = model_helper.ModelHelper(name="fashion")
    reader = model.CreateDB("reader", db="fashion-mnist", db_type="lmdb")

    def forward(m, loss_scale):
        _, loss = brew.softmax_with_loss(m, [brew.fc(m, "data", "fc", 784, 10), "label"], ["softmax", "loss"])
        return [brew.scale(m, loss, "scaled_loss", scale=loss_scale)]

    data_parallel_model.Parallelize(
        model, input_builder_fun=lambda m: brew.image_input(m, reader, ["data", "label"], batch_size=8, crop=28,
                                                            mirror=1, is_test=False),
        forward_pass_builder_fun=forward, optimizer_builder_fun=lambda m: optimizer.build_sgd(m, 0.1),
        devices=[0], cpu_device=True)
    reads = [op for op in model.param_init_net.Proto().op if op.type == "CreateDB"]
    assert len(reads) == 1 and "num_channels" not in {arg.name for arg in reads[0].arg}
    workspace.RunNetOnce(model.param_init_net)
    workspace.RunNetOnce(model.net)
    assert np.isfinite(workspace.FetchBlob("cpu_0/loss"))


def test_image_input_reads_outside_parallelize_as_the_mnist_tutorial_does():
    model = model_helper.ModelHelper(name="single")
    reader = model.CreateDB("reader", db="fashion-mnist", db_type="lmdb")
    data, label = brew.image_input(model, reader, ["data", "label"], batch_size=8, crop=28, mirror=1)
    workspace.RunNetOnce(model.param_init_net)
    workspace.RunNetOnce(model.net)
    images = workspace.FetchBlob("data")
    assert images.shape == (8, 1, 28, 28) and workspace.FetchBlob("label").shape == (8,)
    assert images.min() >= 0 and images.max() <= 1  # fashion-mnist reads as pixel / 255


def test_image_input_reads_a_lockstep_made_lmdb_as_the_trainer_does(tmp_path):
    db = make_lmdb(tmp_path)
    model = model_helper.ModelHelper(name="resnet50")
    reader = model.CreateDB("reader", db=db, db_type="lmdb", num_shards=1, shard_id=0)

    def add_image_input(model):
        data, label = brew.image_input(model, reader, ["data", "label"], batch_size=BATCH_PER_DEVICE,
                                       output_type="float", use_gpu_transform=model._device_type == 1,
                                       use_caffe_datum=True, mean=128., std=128., scale=IMAGE, crop=IMAGE,
                                       mirror=1, is_test=False)

    def forward(model, loss_scale):
        x = brew.conv(model, "data", "conv1", 3, 4, 3, pad=1)
        pred = brew.fc(model, brew.relu(model, x, "relu1"), "pred", 4 * IMAGE * IMAGE, LABELS)
        softmax, loss = model.SoftmaxWithLoss([pred, "label"], ["softmax", "loss"])
        return [model.Scale(loss, scale=loss_scale)]

    data_parallel_model.Parallelize_CPU(model, input_builder_fun=add_image_input, forward_pass_builder_fun=forward,
                                        param_update_builder_fun=lambda m: optimizer.build_sgd(m, 0.01),
                                        devices=[0, 1], blobs_to_keep=["data", "label"])
    create = [op for op in model.param_init_net.Proto().op if op.type == "CreateDB"]
    assert len(create) == 1 and list(create[0].output) == ["reader"]
    args = {a.name: a for a in create[0].arg}
    assert (args["batch_size"].i, args["num_replicas"].i, args["record_format"].s) == (4, 2, b"datum")
    data_parallel_model.RunInitNet(model)
    data_parallel_model.RunNet(model, 1)
    data, label = workspace.FetchBlob("cpu_1/data"), workspace.FetchBlob("cpu_1/label")
    assert data.shape == (BATCH_PER_DEVICE, 3, IMAGE, IMAGE) and np.abs(data).max() <= 1.0
    assert label.shape == (BATCH_PER_DEVICE,) and set(label.tolist()) <= set(range(LABELS))
    with pytest.raises(InvalidInput, match="^blob 'cpu_1/conv1' does not exist in the workspace: if a net computes "
                                           "it, the memory plan gave the nets' intermediate blobs shared buffers; to "
                                           "fetch it, name it in Parallelize's blobs_to_keep or pass "
                                           "share_buffers=False; if not, did you mean 'cpu_1/conv1_b'\\?$"):
        workspace.FetchBlob("cpu_1/conv1")
    with pytest.raises(InvalidInput, match="^blob 'conv1_ww' does not exist in the workspace$"):
        workspace.FetchBlob("conv1_ww")  # no replica's blobs share under that name: no word of the plan
    with pytest.raises(InvalidInput, match="^'reader' is a workspace object"):
        workspace.FetchBlob("reader")
    with pytest.raises(Unsupported, match="mean=100"):
        brew.image_input(model, reader, ["d", "l"], batch_size=4, mean=100.0)


SHARD_PROGRAM = """
import sys
import numpy as np
from caffe2.python import brew, core, data_parallel_model, model_helper, optimizer, workspace
db, out, devices, num_shards, shard_id, store = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), \\
    int(sys.argv[5]), sys.argv[6]
rendezvous = None
if num_shards > 1:
    workspace.RunOperatorOnce(core.CreateOperator("FileStoreHandlerCreate", [], ["store_handler"], path=store,
                                                  prefix="shards"))
    rendezvous = dict(kv_handler="store_handler", shard_id=shard_id, num_shards=num_shards, engine="GLOO",
                      transport="tcp", interface="", exit_nets=None)
model = model_helper.ModelHelper(name="shards")
reader = model.CreateDB("reader", db=db, db_type="lmdb", num_shards=num_shards, shard_id=shard_id)

def add_input(model):
    brew.image_input(model, reader, ["data", "label"], batch_size=2, use_caffe_datum=True, scale=8,
                     crop=8, mirror=1)

def forward(model, loss_scale):
    normalized = brew.spatial_bn(model, "data", "bn", 3, epsilon=1e-3, momentum=0.1)
    pred = brew.fc(model, normalized, "pred", 3 * 8 * 8, 5)
    softmax, loss = model.SoftmaxWithLoss([pred, "label"], ["softmax", "loss"])
    return [model.Scale(loss, scale=loss_scale)]

data_parallel_model.Parallelize(model, input_builder_fun=add_input, forward_pass_builder_fun=forward,
                                optimizer_builder_fun=lambda m: optimizer.build_sgd(m, 0.1, momentum=0.9),
                                devices=list(range(devices)), rendezvous=rendezvous, cpu_device=True,
                                barrier_net_timeout_sec=120)
data_parallel_model.RunInitNet(model)
data_parallel_model.RunNet(model, 3)
names = [p[len("cpu_0/"):] for p in data_parallel_model.GetCheckpointParams(model)]
blobs = [scope + name for scope in data_parallel_model.GetDeviceScopes(model) for name in names]
np.savez(out, **{p: workspace.FetchBlob(p) for p in blobs})
"""


def test_two_shards_through_a_file_store_equal_one_process_with_two_devices(tmp_path):
    db = make_lmdb(tmp_path)

    def launch(out, devices, shards, shard):
        return subprocess.Popen([sys.executable, "-c", SHARD_PROGRAM, db, str(tmp_path / out), str(devices),
                                 str(shards), str(shard), str(tmp_path)], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

    runs = [launch("one.npz", 2, 1, 0), launch("shard0.npz", 1, 2, 0), launch("shard1.npz", 1, 2, 1)]
    for run in runs:
        output, _ = run.communicate(timeout=240)
        assert run.returncode == 0, output
    one, shard0, shard1 = (np.load(tmp_path / name) for name in ("one.npz", "shard0.npz", "shard1.npz"))
    assert sorted(shard0.files) == sorted(shard1.files) and {"cpu_0/pred_w", "cpu_0/bn_rm"} <= set(shard0.files)
    # Shard s holds global replica s, as device s of the one process does; everything is equal everywhere,
    # batch-norm statistics too: the first replica's, broadcast after each step (across the shards as well).
    for name in shard0.files:
        for shard, device in ((shard0, "cpu_0"), (shard1, "cpu_1")):
            np.testing.assert_allclose(shard[name], one[name.replace("cpu_0", device)], rtol=0, atol=1e-6)
    assert not np.array_equal(one["cpu_0/pred_w"], np.zeros_like(one["cpu_0/pred_w"]))
    assert not np.array_equal(one["cpu_0/bn_rm"], np.zeros_like(one["cpu_0/bn_rm"]))
    np.testing.assert_array_equal(shard1["cpu_0/bn_rm"], shard0["cpu_0/bn_rm"])


def test_programming_guide_example_runs_as_a_caffe2_program(tmp_path):
    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python",
                           "caffe2_programming_guide.py")
    for data in ("null", make_lmdb(tmp_path)):
        result = subprocess.run([sys.executable, example, "--gpus", "0,1", "--batch_size", "4", "--image_size", "32",
                                 "--num_labels", str(LABELS), "--iterations", "2", "--train_data", data],
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "step 2/2: loss " in result.stdout and "161 parameters per device" in result.stdout


def test_test_model_without_parameters_reads_the_training_models(tmp_path):
    """The trainer's test net: a second model (init_params=False, no update) over the training parameters."""
    db = make_lmdb(tmp_path)
    train = trainer_model()
    test_model = model_helper.ModelHelper(name="resnet50_test", arg_scope={"order": "NCHW"}, init_params=False)
    test_reader = test_model.CreateDB("test_reader", db=db, db_type="lmdb")

    def test_input(model):
        brew.image_input(model, test_reader, ["data", "label"], batch_size=BATCH_PER_DEVICE, use_caffe_datum=True,
                         mean=128., std=128., scale=IMAGE, crop=IMAGE, mirror=1, is_test=True)

    data_parallel_model.Parallelize(test_model, input_builder_fun=test_input,
                                    forward_pass_builder_fun=create_model_ops, param_update_builder_fun=None,
                                    devices=[0, 1], cpu_device=True)
    init_types = {op.type for op in test_model.param_init_net.Proto().op}
    assert "Broadcast" not in init_types and "XavierFill" not in init_types and train.GetParams("cpu_0")
    workspace.RunNetOnce(test_model.param_init_net)
    workspace.CreateNet(test_model.net)
    workspace.RunNet(test_model.net.Proto().name)
    assert 0.0 <= float(workspace.FetchBlob("cpu_1/accuracy").reshape(-1)[0]) <= 1.0


def test_model_helpers_caffe2_accessors_and_refusals():
    model = model_helper.ModelHelper(name="accessors")
    brew.fc(model, "data", "fc", 4, 2)
    assert model.Proto() is model.net.Proto() and model.InitProto() is model.param_init_net.Proto()
    assert model.get_name() == "accessors"
    assert [str(w) for w in model.weights] == ["fc_w"] and [str(b) for b in model.biases] == ["fc_b"]
    with pytest.raises(SystemExit, match=r"^caffe2 on lockstep: ModelHelper.Summarize is not supported$"):
        model.Summarize()


def test_the_toy_regression_tutorial_learns_its_weights():
    """Caffe2's Toy_Regression tutorial as written: core.Net, BlobReference operators, GivenTensorFill and
    Net.AddGradientOperators with an update by hand."""
    init_net = core.Net("init")
    W = init_net.UniformFill([], "W", shape=[1, 2], min=-1., max=1.)
    B = init_net.ConstantFill([], "B", shape=[1], value=0.0)
    W_gt = init_net.GivenTensorFill([], "W_gt", shape=[1, 2], values=[2.0, 1.5])
    B_gt = init_net.GivenTensorFill([], "B_gt", shape=[1], values=[0.5])
    ONE = init_net.ConstantFill([], "ONE", shape=[1], value=1.)
    ITER = init_net.ConstantFill([], "ITER", shape=[1], value=0, dtype=core.DataType.INT64)
    train_net = core.Net("train")
    X = train_net.GaussianFill([], "X", shape=[64, 2], mean=0.0, std=1.0, run_once=0)
    Y_gt = X.FC([W_gt, B_gt], "Y_gt")
    noise = train_net.GaussianFill([], "noise", shape=[64, 1], mean=0.0, std=1.0, run_once=0)
    Y_noise = Y_gt.Add(noise, "Y_noise").StopGradient([], "Y_noise")
    Y_pred = X.FC([W, B], "Y_pred")
    loss = train_net.SquaredL2Distance([Y_noise, Y_pred], "dist").AveragedLoss([], ["loss"])
    gradient_map = train_net.AddGradientOperators([loss])
    assert {str(blob) for blob in gradient_map} == {"W", "B", "loss"}
    train_net.Iter(ITER, ITER)
    LR = train_net.LearningRate(ITER, "LR", base_lr=-0.1, policy="step", stepsize=20, gamma=0.9)
    train_net.WeightedSum([W, ONE, gradient_map[W], LR], W)
    train_net.WeightedSum([B, ONE, gradient_map[B], LR], B)
    workspace.RunNetOnce(init_net)
    workspace.CreateNet(train_net)
    workspace.RunNet(train_net.Proto().name, 100)
    np.testing.assert_allclose(workspace.FetchBlob("W"), [[2.0, 1.5]], atol=0.15)
    np.testing.assert_allclose(workspace.FetchBlob("B"), [0.5], atol=0.15)


def test_brew_iter_counts_the_runs():
    model = cnn.CNNModelHelper(name="iter")
    counter = model.Iter("ITER")  # brew.iter, as CNNModelHelper offers it
    workspace.RunNetOnce(model.param_init_net)
    workspace.CreateNet(model.net)
    workspace.RunNet(model.net.Proto().name, 3)
    assert str(counter) == "ITER" and workspace.FetchBlob("ITER").tolist() == [3]


def test_workspace_takes_caffe2s_arguments(tmp_path):
    assert workspace.ResetWorkspace(str(tmp_path / "root")) and (tmp_path / "root").is_dir()
    net = core.Net("relu")
    net.Relu("x", "y")
    assert workspace.CreateNet(net, input_blobs=["x"]) == "relu" and workspace.HasBlob("x")
    assert workspace.RunNet("relu", allow_fail=True) is False  # x holds no value yet
    with pytest.raises(Exception, match="x"):
        workspace.RunNet("relu")
    fill = core.CreateOperator("ConstantFill", [], ["z"], shape=[2], value=2.0)
    assert workspace.RunOperatorOnce(fill.SerializeToString())
    np.testing.assert_array_equal(workspace.FetchBlob("z"), [2.0, 2.0])
