"""The Python front-end over the C++ core: models and layers build the same NetDefs as C++, any registered
operator can be added, blobs go in and out as numpy arrays, Parallelize trains replicas that stay equal and
match a numpy reference, and errors arrive as Python exceptions with the core's one-line message. Run with
build/python on PYTHONPATH."""
import re
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from lockstep import (brew, checkpoint, core, data_parallel_model, mixed_precision, model_helper, optimizer,
                      workspace)
from lockstep._core import C, Error, InvalidInput


@pytest.fixture(autouse=True)
def fresh_workspace():
    workspace.ResetWorkspace()
    yield
    workspace.ResetWorkspace()


def test_brew_layers_build_scoped_ops_and_params():
    model = model_helper.ModelHelper(name="m")
    with core.NameScope("gpu_0"):
        x = brew.conv(model, "data", "conv1", 1, 4, 3, pad=1, weight_init=("GaussianFill", {"std": 0.01}))
        x = brew.relu(model, x, "relu1")
        x = brew.max_pool(model, x, "pool1", kernel=2, stride=2)
        logits = brew.fc(model, x, "fc", 4 * 4 * 4, 10)
    assert logits == "gpu_0/fc"
    assert model.GetParams("gpu_0") == ["gpu_0/conv1_w", "gpu_0/conv1_b", "gpu_0/fc_w", "gpu_0/fc_b"]
    assert model.GetParams("gpu_1") == []
    net = model.net.Proto()
    assert [op.type for op in net.op] == ["Conv", "Relu", "MaxPool", "FC"]
    assert list(net.op[0].input) == ["gpu_0/data", "gpu_0/conv1_w", "gpu_0/conv1_b"]
    assert {a.name: a.i for a in net.op[0].arg}["pad"] == 1
    init = model.param_init_net.Proto()
    assert [op.type for op in init.op] == ["GaussianFill", "ConstantFill", "XavierFill", "ConstantFill"]
    assert "Conv" in str(net)  # protobuf text format


def test_nets_of_one_name_get_names_of_their_own_as_in_caffe2():
    first, second = model_helper.ModelHelper(name="twin"), model_helper.ModelHelper(name="twin")
    assert (first.name, second.name) == ("twin", "twin")
    names = [first.net.Name(), first.param_init_net.Name(), second.net.Name(), second.param_init_net.Name()]
    assert names == ["twin", "twin_init", "twin_1", "twin_init_1"]
    workspace.FeedBlob("x", np.ones((1, 2), np.float32))
    for model in (first, second):
        brew.fc(model, "x", "fc", 2, 1)
        workspace.CreateNet(model.param_init_net)
        workspace.RunNet(model.param_init_net)
        workspace.CreateNet(model.net)
    workspace.RunNet(second.net)  # the first model's net is still there
    assert workspace.HasBlob("fc") and first.net.Name() != second.net.Name()
    net = core.Net("standalone")
    assert (net.Name(), core.Net(net).Name(), core.Net(net.Proto()).Name()) == (
        "standalone", "standalone_1", "standalone_2")
    assert [core.Net(name).Name() for name in ("solo_1", "solo", "solo")] == ["solo_1", "solo", "solo_2"]


@pytest.mark.parametrize("make", [lambda: core.Net("edited"), lambda: model_helper.ModelHelper(name="edited").net])
def test_caffe2s_net_methods_read_and_edit_the_netdef(make):
    net = make()
    x = net.AddExternalInput("x")
    with pytest.raises(InvalidInput, match="already has an external input named x"):
        net.AddExternalInput("x")
    y = net.Relu(x, "y")
    z = net.Scale(y, "z", scale=2.0)
    assert net.BlobIsDefined("y") and net.BlobIsDefined("x") and not net.BlobIsDefined("w")
    assert net.UsesBlob("y") and not net.UsesBlob("z") and net.UsedBlobNames() == {"x", "y", "z"}
    assert net.GetBlobRef("z") == "z"
    with pytest.raises(KeyError, match="Net does not define blob w"):
        net.GetBlobRef("w")
    with pytest.raises(InvalidInput, match="AddExternalOutput: no operator writes w"):
        net.AddExternalOutput(core.BlobReference("w"))
    net.AddExternalOutput(z)
    # A clone of the second op alone, its input renamed: it reads u and writes z.
    clone = net.Clone("half", blob_remap={"y": "u"}, op_id_mask=[1], update_external_list=True)
    assert clone.Name().startswith("half") and clone.Name() != net.Name()
    assert [list(op.input) for op in clone.Proto().op] == [["u"]]
    assert list(clone.Proto().external_input) == ["u"] and list(clone.Proto().external_output) == ["z"]
    whole = core.Net("whole")
    whole.AppendNet(net)
    assert [op.type for op in whole.Proto().op] == ["Relu", "Scale"]
    assert list(whole.Proto().external_input) == ["x"] and list(whole.Proto().external_output) == ["z"]
    workspace.FeedBlob("x", np.array([-1.0, 3.0], np.float32))
    workspace.RunNetOnce(net)
    np.testing.assert_array_equal(workspace.FetchBlob("z"), [0.0, 6.0])


def test_any_registered_operator_through_net_attributes():
    model = model_helper.ModelHelper(name="ops")
    out = model.net.Scale("x", "y", scale=2.5)
    a, b = model.net.Split("z", ["a", "b"], axis=0)
    model.param_init_net.ConstantFill([], "x", shape=[3], value=2.0)
    assert (out, a, b) == ("y", "a", "b")
    op = model.net.Proto().op[0]
    assert op.type == "Scale" and op.arg[0].name == "scale" and op.arg[0].f == pytest.approx(2.5)
    workspace.RunNetOnce(model.param_init_net)
    workspace.RunNetOnce(model.net.Proto().__class__(name="just_scale", op=[op]))
    np.testing.assert_array_equal(workspace.FetchBlob("y"), np.full(3, 5.0, np.float32))


def test_a_name_that_is_no_operator_type_is_no_attribute():
    model = model_helper.ModelHelper(name="m")
    with pytest.raises(AttributeError, match=r"^Net has no attribute or operator type 'Rleu'; did you mean Relu"):
        model.net.Rleu("a", "b")
    with pytest.raises(AttributeError, match=r"^Net has no attribute or operator type 'DotProduct'"):
        model.net.DotProduct("x", "y")
    with pytest.raises(AttributeError, match=r"^ModelHelper has no attribute or operator type 'Bogus'"):
        model.Bogus("a", "b")
    assert not hasattr(core.Net("n"), "external_inputs") and not hasattr(model, "_private")
    assert len(model.net.Proto().op) == 0
    with pytest.raises(InvalidInput, match="argument 'scale' is a dict"):
        model.net.Scale("x", "y", scale={})
    with pytest.raises(InvalidInput, match="argument 'strides' must be a list of ints, got the int 2"):
        brew.conv(model, "data", "c", 1, 1, 3, strides=2)
    with pytest.raises(InvalidInput, match="order='NHWC' is not supported"):
        brew.conv(model, "data", "c", 1, 1, 3, order="NHWC")
    # Caffe2's choices of implementation and buffers: lockstep makes its own, so they are taken and change nothing.
    brew.conv(model, "data", "tuned", 1, 1, 3, engine="CUDNN", shared_buffer=1, use_cudnn=True, order="NCHW")
    assert [a.name for a in model.net.Proto().op[-1].arg] == ["kernel", "stride", "pad", "dilation", "group"]


@pytest.mark.parametrize("build, message", [
    (lambda m: brew.fc(m, "x", "f", 4.0, 5), r"brew.fc: dim_in must be a whole number of at least 1, got 4.0"),
    (lambda m: brew.fc(m, "x", "f", 4, -5), r"brew.fc: dim_out must be a whole number of at least 1, got -5"),
    (lambda m: brew.conv(m, "x", "c", 1, 2, 0), r"brew.conv: kernel must be a whole number of at least 1, got 0"),
    (lambda m: brew.fc(m, "x", "f", 4, 5, axiz=2), r"brew.fc: unknown argument 'axiz'; known: axis"),
    (lambda m: brew.conv(m, "x", "c", 6, 4, 3, group=4), r"^conv 'c': group 4 must divide its channels, 6 in and 4 out$"),
    (lambda m: brew.conv(m, "x", "c", 6, 4, 3, group=0), r"^conv 'c': group 0 must divide its channels"),
    (lambda m: brew.relu(m, "x", "r", inplace=True),
     r"brew.relu: unknown argument 'inplace'; it takes no other keyword arguments"),
    (lambda m: brew.fc(m, "x", "f", 4, 5, weight_init=("FooFill", {})),
     r"unknown operator type 'FooFill'; `lockstep ops` lists them"),
    (lambda m: brew.conv(m, "x", "c", 1, 2, 3, weight_init=("GaussianFill", {"sigma": 1.0})),
     r"GaussianFill\(\) -> c_w: unknown argument 'sigma'"),
    (lambda m: [brew.fc(m, "x", "f", 4, 5), brew.fc(m, "y", "f", 5, 5)],
     r"parameter 'f_w' is created twice in model 'layers'; give each layer its own name"),
])
def test_layer_mistakes_are_refused_where_the_layer_is_built(build, message):
    model = model_helper.ModelHelper(name="layers")
    with pytest.raises(InvalidInput, match=message):
        build(model)


def test_brew_windows_that_are_not_square_as_caffe2_spells_them():
    model = model_helper.ModelHelper(name="m")
    y = brew.conv(model, "x", "c", 2, 3, [1, 3], stride_h=2, stride_w=1, pad_t=0, pad_l=1, pad_b=0, pad_r=1,
                  weight_init=("GaussianFill", {"std": 1.0}), bias_init=("GaussianFill", {"std": 1.0}))
    p = brew.max_pool(model, y, "p", kernel_h=2, kernel_w=1, strides=[2, 1])
    x = np.random.RandomState(0).randn(2, 2, 5, 4).astype(np.float32)
    workspace.FeedBlob("x", x)
    workspace.RunNetOnce(model.param_init_net)
    workspace.RunNetOnce(model.net)
    w, b = workspace.FetchBlob("c_w"), workspace.FetchBlob("c_b")
    assert w.shape == (3, 2, 1, 3)
    padded = np.pad(x, ((0, 0), (0, 0), (0, 0), (1, 1)))
    expected = np.empty((2, 3, 3, 4), np.float32)
    for i in range(3):
        for j in range(4):
            window = padded[:, :, 2 * i:2 * i + 1, j:j + 3]
            expected[:, :, i, j] = np.einsum("nchw,mchw->nm", window, w) + b
    np.testing.assert_allclose(workspace.FetchBlob(y), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(workspace.FetchBlob(p), np.maximum(expected[:, :, 0:1], expected[:, :, 1:2]), rtol=1e-5,
                               atol=1e-5)
    with pytest.raises(InvalidInput, match=r"brew.conv: kernel is an int or \[height, width\], got \[3\]"):
        brew.conv(model, "x", "c2", 2, 3, [3])
    with pytest.raises(InvalidInput, match="MaxPool\\(x\\) -> p2: 'kernel_h' and 'kernel_w' must be given together"):
        brew.max_pool(model, "x", "p2", kernel_h=2)
    with pytest.raises(InvalidInput, match="brew.max_pool: give kernel or kernel_h/kernel_w/kernels, not both"):
        brew.max_pool(model, "x", "p3", kernel=3, kernel_h=2, kernel_w=1)
    with pytest.raises(InvalidInput, match="brew.conv: give pad or pad_t/pad_l/pad_b/pad_r/pads, not both"):
        brew.conv(model, "x", "c3", 2, 3, 3, pad=1, pads=[0, 1, 0, 1])
    with pytest.raises(InvalidInput, match="'pad_t', 'pad_l', 'pad_b' and 'pad_r' must be given together"):
        brew.conv(model, "x", "c4", 2, 3, 3, pad_t=1)


def test_brew_concat_tanh_and_sigmoid_as_in_caffe2():
    model = model_helper.ModelHelper(name="m")
    with core.NameScope("gpu_0"):
        joined = brew.concat(model, ["a", "b"], "ab", order="NCHW")
        squashed = brew.sigmoid(model, brew.tanh(model, joined, "t"), "s")
    assert (joined, squashed) == ("gpu_0/ab", "gpu_0/s")
    assert list(model.net.Proto().op[0].output) == ["gpu_0/ab", "gpu_0/_ab_concat_dims"]
    a, b = np.full((1, 1, 2), -1.0, np.float32), np.full((1, 2, 2), 2.0, np.float32)
    workspace.FeedBlob("gpu_0/a", a)
    workspace.FeedBlob("gpu_0/b", b)
    workspace.RunNetOnce(model.net)
    expected = 1 / (1 + np.exp(-np.tanh(np.concatenate([a, b], axis=1))))
    np.testing.assert_allclose(workspace.FetchBlob(squashed), expected, rtol=1e-6)
    np.testing.assert_array_equal(workspace.FetchBlob("gpu_0/_ab_concat_dims"), [1, 2])
    with pytest.raises(InvalidInput, match="brew.concat: unknown argument 'axes'; known: axis"):
        brew.concat(model, ["a", "b"], "c", axes=2)


def test_brew_fc_flattens_from_its_axis():
    model = model_helper.ModelHelper(name="m")
    y = brew.fc(model, "x", "fc", 4, 3, axis=2, weight_init=("GaussianFill", {"std": 1.0}))
    x = np.random.RandomState(0).randn(2, 5, 2, 2).astype(np.float32)
    workspace.FeedBlob("x", x)
    workspace.RunNetOnce(model.param_init_net)
    workspace.RunNetOnce(model.net)
    w, b = workspace.FetchBlob("fc_w"), workspace.FetchBlob("fc_b")
    np.testing.assert_allclose(workspace.FetchBlob(y), x.reshape(2, 5, 4) @ w.T + b, rtol=1e-5, atol=1e-5)
    assert [a.i for a in model.net.Proto().op[0].arg if a.name == "axis"] == [2]


def test_a_nets_proto_stays_live_as_in_caffe2():
    model = model_helper.ModelHelper(name="m")
    proto = model.net.Proto()
    proto.type = "dag"
    proto.op.extend([core.CreateOperator("ConstantFill", [], ["x"], shape=[2], value=3.0)])
    model.net.Relu("x", "y")  # the edit reaches the model before this op is added after it
    assert proto is model.net.Proto()
    assert [op.type for op in proto.op] == ["ConstantFill", "Relu"] and proto.type == "dag"
    workspace.RunNetOnce(model.net)
    np.testing.assert_array_equal(workspace.FetchBlob("y"), [3.0, 3.0])
    del proto.op[1]
    model.net.Relu("x", "z")
    assert [op.output[0] for op in model.net.Proto().op] == ["x", "z"]
    proto.op[0].arg.add(name="alpha", f=1.0)  # an argument ConstantFill does not declare
    with pytest.raises(InvalidInput, match="alpha"):
        workspace.RunNetOnce(model.net)
    del proto.op[0].arg[-1]
    # An edit in place, then an op the model adds: both stand.
    next(arg for arg in proto.op[0].arg if arg.name == "value").f = 5.0
    brew.relu(model, "z", "u")
    workspace.RunNetOnce(model.net)
    np.testing.assert_array_equal(workspace.FetchBlob("u"), [5.0, 5.0])
    stale = model.net.Proto()
    brew.relu(model, "z", "w")
    stale.op.extend([core.CreateOperator("Relu", ["w"], ["v"])])
    edited = rf"^net '{model.net.Name()}': its Proto\(\) was edited after ops were added"
    with pytest.raises(InvalidInput, match=edited):
        workspace.RunNetOnce(model.net)


def test_feed_and_fetch_keep_values_and_types():
    for dtype in (np.float32, np.float16, np.int32, np.int64, np.uint8):
        value = (np.arange(24).reshape(2, 3, 4) % 7).astype(dtype)
        workspace.FeedBlob("v", value)
        got = workspace.FetchBlob("v")
        assert got.dtype == dtype and got.shape == (2, 3, 4)
        np.testing.assert_array_equal(got, value)
    transposed = np.arange(6, dtype=np.float32).reshape(2, 3).T  # not C-contiguous
    workspace.FeedBlob("t", transposed)
    np.testing.assert_array_equal(workspace.FetchBlob("t"), transposed)
    assert workspace.HasBlob("t") and "t" in workspace.Blobs()
    with pytest.raises(InvalidInput, match=r"^FeedBlob 'd': arrays of float64 cannot be fed; .*"
                                           r"\(e.g. array.astype\(numpy.float32\)\)$"):
        workspace.FeedBlob("d", np.zeros(2))
    with pytest.raises(InvalidInput, match="'missing'"):
        workspace.FetchBlob("missing")
    net = core.Net("unrun")
    net.Relu("x", "y")
    workspace.CreateNet(net)  # makes its blobs, empty
    with pytest.raises(InvalidInput, match=r"^blob 'y' holds no value yet; run the net that writes it first$"):
        workspace.FetchBlob("y")


def test_fetch_without_copy_is_a_read_only_view_of_the_blob():
    model = model_helper.ModelHelper(name="counter")
    model.param_init_net.ConstantFill([], "x", shape=[4], value=1.0)
    model.net.Scale("x", "x", scale=2.0)
    workspace.RunNetOnce(model.param_init_net)
    workspace.CreateNet(model.net)
    copy, view = workspace.FetchBlob("x"), workspace.FetchBlob("x", copy=False)
    assert not view.flags.writeable
    workspace.RunNet(model.net, num_iter=3)  # the loop runs in C++
    np.testing.assert_array_equal(copy, np.ones(4, np.float32))
    np.testing.assert_array_equal(view, np.full(4, 8.0, np.float32))
    workspace.FeedBlob("x", np.zeros((1 << 20,), np.float32))  # moves the blob to a larger buffer
    np.testing.assert_array_equal(view, np.full(4, 8.0, np.float32))  # the view holds the old one
    workspace.ResetWorkspace()
    np.testing.assert_array_equal(view, np.full(4, 8.0, np.float32))  # the view keeps its workspace
    with pytest.raises(InvalidInput, match="no net 'counter'"):
        workspace.RunNet("counter")


def fc_softmax_builders(lr, devices, batch):
    def add_input(model):
        pass  # fed per device

    def forward(model, loss_scale):
        logits = brew.fc(model, "data", "fc", 6, 3, weight_init=("GaussianFill", {"std": 0.5}))
        softmax, loss = brew.softmax_with_loss(model, [logits, "label"], ["softmax", "loss"])
        return [brew.scale(model, loss, "scaled_loss", scale=loss_scale)]

    def update(model):
        optimizer.build_sgd(model, base_learning_rate=lr, momentum=0.0)

    return dict(input_builder_fun=add_input, forward_pass_builder_fun=forward, param_update_builder_fun=update,
                devices=list(range(devices)))


def sgd_by_hand_with_weight_decay(model):
    """Caffe2's own way: weight decay, then param = param - lr * grad by WeightedSum."""
    optimizer.add_weight_decay(model, 0.1)
    one = model.param_init_net.ConstantFill([], "one", shape=[1], value=1.0)
    minus_lr = model.param_init_net.ConstantFill([], "minus_lr", shape=[1], value=-0.5)
    for param in model.GetParams():
        model.net.WeightedSum([param, one, model.param_to_grad[param], minus_lr], param)


@pytest.mark.parametrize("update", ["build_sgd", "by_hand_with_weight_decay"])
def test_parallelize_matches_a_numpy_sgd_step_and_keeps_replicas_equal(update):
    rng = np.random.default_rng(0)
    data = rng.standard_normal((8, 6)).astype(np.float32)
    label = rng.integers(0, 3, 8).astype(np.int32)
    model = model_helper.ModelHelper(name="fc_softmax")
    builders = fc_softmax_builders(0.5, 2, 8)
    decay = 0.0
    if update == "by_hand_with_weight_decay":
        builders["param_update_builder_fun"], decay = sgd_by_hand_with_weight_decay, 0.1
    parallel = data_parallel_model.Parallelize_CPU(model, **builders)
    assert parallel.scopes == ["cpu_0/", "cpu_1/"]
    assert data_parallel_model.GetCheckpointParams(model)[:2] == ["cpu_0/fc_w", "cpu_0/fc_b"]
    workspace.RunNetOnce(model.param_init_net)
    w, b = workspace.FetchBlob("cpu_0/fc_w"), workspace.FetchBlob("cpu_0/fc_b")
    np.testing.assert_array_equal(workspace.FetchBlob("cpu_1/fc_w"), w)
    for d, scope in enumerate(parallel.scopes):
        workspace.FeedBlob(scope + "data", data[4 * d:4 * d + 4])
        workspace.FeedBlob(scope + "label", label[4 * d:4 * d + 4])
    workspace.CreateNet(model.net)
    workspace.RunNet(model.net)

    logits = data @ w.T + b
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    p[np.arange(8), label] -= 1
    want_w = w - 0.5 * ((p.T @ data) / 8 + decay * w)
    for scope in parallel.scopes:
        np.testing.assert_allclose(workspace.FetchBlob(scope + "fc_w"), want_w, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(workspace.FetchBlob("cpu_1/fc_w"), workspace.FetchBlob("cpu_0/fc_w"))


def test_fetching_a_blob_the_memory_plan_shared_says_how_to_keep_it():
    def add_input(model):  # inputs of known shapes: the plan places every blob in one arena per device
        model.net.GaussianFill([], "data", shape=[4, 6])
        model.net.ConstantFill([], "label", shape=[4], value=1, dtype=core.DataType.INT32)

    model = model_helper.ModelHelper(name="placed")
    builders = fc_softmax_builders(0.5, 2, 8)
    builders["input_builder_fun"] = add_input
    data_parallel_model.Parallelize_CPU(model, **builders)
    workspace.RunNetOnce(model.param_init_net)
    workspace.CreateNet(model.net)
    workspace.RunNet(model.net)
    keep = ("the memory plan gave the nets' intermediate blobs shared buffers; to fetch it, name it in "
            "Parallelize's blobs_to_keep or pass share_buffers=False")
    with pytest.raises(InvalidInput, match=re.escape(f"blob 'cpu_1/fc' is not kept: {keep}")):
        workspace.FetchBlob("cpu_1/fc")
    with pytest.raises(InvalidInput, match=re.escape(f"blob 'cpu_0/fc_ww' does not exist in the workspace: if a "
                                                     f"net computes it, {keep}; if not, did you mean 'cpu_0/fc_w'?")):
        workspace.FetchBlob("cpu_0/fc_ww")
    with pytest.raises(InvalidInput, match="^blob 'fc_w' does not exist in the workspace$"):
        workspace.FetchBlob("fc_w")


def test_parallelize_without_update_builds_the_forward_pass_only():
    model = model_helper.ModelHelper(name="forward")
    builders = fc_softmax_builders(0.5, 2, 8)
    builders["param_update_builder_fun"] = None
    data_parallel_model.Parallelize_CPU(model, **builders)
    types = {op.type for op in model.net.Proto().op}
    assert "FC" in types and not any("Gradient" in t or t == "MomentumSGDUpdate" for t in types)


@pytest.mark.parametrize("arguments, message", [
    (dict(input_builder_fun=None), "input_builder_fun is None; pass a function of the model"),
    (dict(param_update_builder_fun=3), "the update builder is 3; pass a function of the model"),
    (dict(bucket_bytes=-5), "bucket_bytes must be a whole number of at least 0, got -5"),
    (dict(micro_batches=0), "micro_batches must be a whole number of at least 1, got 0"),
])
def test_parallelize_refuses_bad_arguments_in_one_line(arguments, message):
    model = model_helper.ModelHelper(name="bad_arguments")
    builders = dict(input_builder_fun=lambda m: None, forward_pass_builder_fun=lambda m, s: [], devices=[0])
    with pytest.raises(InvalidInput, match="^Parallelize: " + re.escape(message) + "$"):
        data_parallel_model.Parallelize_CPU(model, **{**builders, **arguments})
    assert len(model.net.Proto().op) == 0


@pytest.mark.parametrize("name", [None, "", 3])
def test_feed_blob_needs_a_name(name):
    with pytest.raises(InvalidInput, match=f"^FeedBlob: the blob's name is {re.escape(repr(name))}; pass a "
                                           "non-empty string$"):
        workspace.FeedBlob(name, np.ones(2, np.float32))


def test_parallelize_refuses_micro_batches_that_do_not_split_the_readers_batch():
    model = model_helper.ModelHelper(name="micro")
    model.param_init_net.CreateDB([], "reader", db="null", batch_size=4, num_replicas=1, num_channels=1,
                                  image_size=8, num_labels=3)

    def forward(m, loss_scale):
        logits = brew.fc(m, "data", "fc", 64, 3)
        _, loss = brew.softmax_with_loss(m, [logits, "label"], ["softmax", "loss"])
        return [brew.scale(m, loss, "scaled_loss", scale=loss_scale)]

    with pytest.raises(InvalidInput, match=r"^Parallelize: reader 'reader' gives each replica batches of 4, which "
                                           r"do not split into micro_batches=3; use a batch_size that is a "
                                           r"multiple of 3$"):
        data_parallel_model.Parallelize_CPU(
            model, input_builder_fun=lambda m: brew.image_input(m, "reader", ["data", "label"]),
            forward_pass_builder_fun=forward, devices=[0], micro_batches=3)


def test_builder_exceptions_leave_parallelize_with_their_traceback():
    def forward(model, loss_scale):
        raise KeyError("no such layer in my config")

    model = model_helper.ModelHelper(name="broken")
    with pytest.raises(KeyError, match="no such layer") as raised:
        data_parallel_model.Parallelize_CPU(model, input_builder_fun=lambda m: None,
                                            forward_pass_builder_fun=forward, devices=[0])
    assert any(entry.name == "forward" for entry in raised.traceback)


def test_a_builder_that_raises_leaves_the_model_as_it_was():
    builders = fc_softmax_builders(0.5, 2, 8)
    correct = builders["forward_pass_builder_fun"]

    def half_built(model, loss_scale):
        brew.fc(model, "data", "fc", 6, 3)
        raise ValueError("a bug after the first layer")

    model = model_helper.ModelHelper(name="retried")
    with pytest.raises(ValueError, match="a bug after the first layer"):
        data_parallel_model.Parallelize_CPU(model, **dict(builders, forward_pass_builder_fun=half_built))
    assert len(model.net.Proto().op) == 0 and len(model.param_init_net.Proto().op) == 0
    assert model.GetParams() == []
    data_parallel_model.Parallelize_CPU(model, **dict(builders, forward_pass_builder_fun=correct))
    assert model.GetParams()[:2] == ["cpu_0/fc_w", "cpu_0/fc_b"]


@pytest.mark.parametrize("devices", ["01", [0, "1"], [0.5]])
def test_parallelize_needs_device_ids(devices):
    model = model_helper.ModelHelper(name="devices")
    with pytest.raises(InvalidInput, match=r"^Parallelize: devices must be a list of device ids such as \[0, 1\], "
                                           "got " + re.escape(repr(devices)) + "$"):
        data_parallel_model.Parallelize_CPU(model, **dict(fc_softmax_builders(0.5, 2, 8), devices=devices))


def test_parallelize_sends_the_gradients_in_the_wire_dtype_it_is_given():
    model = model_helper.ModelHelper(name="wire")
    data_parallel_model.Parallelize_CPU(model, **dict(fc_softmax_builders(0.5, 2, 8), allreduce_dtype="bfloat16"))
    wires = [arg.s for op in model.net.Proto().op if op.type == "Allreduce" for arg in op.arg
             if arg.name == "wire_dtype"]
    assert wires == [b"bfloat16"]
    with pytest.raises(InvalidInput, match="unknown allreduce_dtype 'fp8'; choose float, bfloat16 or float16"):
        data_parallel_model.Parallelize_CPU(model_helper.ModelHelper(name="bad_wire"),
                                            **dict(fc_softmax_builders(0.5, 2, 8), allreduce_dtype="fp8"))


def test_core_errors_keep_their_one_line_message():
    model = model_helper.ModelHelper(name="bad")
    with pytest.raises(InvalidInput, match="devices is empty"):
        data_parallel_model.Parallelize_CPU(model, **dict(fc_softmax_builders(0.1, 1, 4), devices=[]))
    with pytest.raises(Error) as raised:
        model.net.Relu(["a", "b"], "c")
        workspace.RunNetOnce(model.net)
    assert "\n" not in str(raised.value) and "Relu" in str(raised.value)
    # An error from a helper the operator calls names the operator too.
    workspace.FeedBlob("ints", np.ones((1, 1, 4, 4), np.int32))
    net = core.Net("dtypes")
    net.Relu("ints", "out")
    with pytest.raises(InvalidInput, match=r"^Relu\(ints\) -> out: CPU operators compute in float32 or bfloat16, "
                                           r"not int32$"):
        workspace.RunNetOnce(net)


def test_make_argument_takes_numpy_values_as_caffe2_and_refuses_what_float32_cannot_hold():
    assert core.MakeArgument("flag", np.bool_(True)).i == 1
    assert core.MakeArgument("count", np.array(3)).i == 3
    assert list(core.MakeArgument("shape", np.array([[2, 3], [4, 5]])).ints) == [2, 3, 4, 5]
    assert list(core.MakeArgument("scales", np.array([0.5, 2.0], np.float32)).floats) == [0.5, 2.0]
    assert core.MakeArgument("big", 3e38).f == pytest.approx(3e38)
    for value in (1e40, [1.0, -1e39]):
        with pytest.raises(InvalidInput, match=r"^argument x: -?1e\+(40|39) is beyond float32's range"):
            core.MakeArgument("x", value)


@pytest.mark.parametrize("num_iter", [0, 2.5, "2", True])
def test_run_net_takes_a_whole_number_of_iterations(num_iter):
    net = core.Net("counted")
    net.ConstantFill([], "one", shape=[1], value=1.0)
    workspace.CreateNet(net)
    with pytest.raises(InvalidInput, match=f"^RunNet: num_iter must be a whole number of at least 1, got "
                                           f"{re.escape(repr(num_iter))}$"):
        workspace.RunNet(net, num_iter)
    assert workspace.RunNet(net, np.int64(2))


def test_scopes_nest_and_place_ops_on_devices():
    model = model_helper.ModelHelper(name="scopes")
    with core.NameScope("a"), core.NameScope("b"):
        assert core.CurrentNameScope() == "a/b/"
        with core.DeviceScope(core.DeviceOption(core.CPU, 3)):
            out = brew.relu(model, "x", "y")
    assert out == "a/b/y" and core.CurrentNameScope() == ""
    op = model.net.Proto().op[0]
    assert list(op.input) == ["a/b/x"] and op.device_option.device_id == 3
    assert brew.relu(model, core.BlobReference("a/b/y"), "z") == "z"  # references are not rescoped


def test_compute_in_casts_the_input_and_parameters_and_refuses_what_the_cpu_cannot_do():
    def build(model):
        return brew.fc(model, brew.relu(model, "x", "h"), "y", 4, 3)

    for dtype, message in (("half", "dtype 'half'; use float16 or bfloat16"),
                           ("float16", "float16 needs a GPU; CPUs compute in bfloat16")):
        model = model_helper.ModelHelper(name=f"refused_{dtype}")
        with pytest.raises(InvalidInput, match=message):
            mixed_precision.compute_in(model, dtype, "x", lambda: build(model))
    if not C.cpu_has_bfloat16():
        return
    model = model_helper.ModelHelper(name="bf16")
    out = mixed_precision.compute_in(model, "bfloat16", "x", lambda: build(model))
    assert str(out) == "y_float"
    ops = model.net.Proto().op
    assert [op.type for op in ops] == ["Cast", "Cast", "Cast", "Relu", "FC", "Cast"]  # the casts come first
    assert {op.output[0] for op in ops if op.type == "Cast"} == {"x_bf16", "y_w_bf16", "y_b_bf16", "y_float"}


def test_ctrl_c_interrupts_run_net_between_iterations():
    """RunNet loops in C++; SIGINT must still raise KeyboardInterrupt at the next iteration, not after the
    last of a billion."""
    program = textwrap.dedent("""
        import numpy as np, sys
        from lockstep import model_helper, workspace
        model = model_helper.ModelHelper(name="spin")
        workspace.FeedBlob("x", np.ones((64, 64), dtype=np.float32))
        model.net.Scale("x", "y", scale=0.5)
        workspace.CreateNet(model.net)
        print("ready", flush=True)
        try:
            workspace.RunNet(model.net, 10**9)
        except KeyboardInterrupt:
            print("interrupted", workspace.FetchBlob("y")[0, 0], flush=True)
        """)
    process = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline() == "ready\n"
        time.sleep(0.2)  # well inside the loop
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert out == "interrupted 0.5\n"
    assert process.returncode == 0


def test_builders_run_under_the_replicas_scopes_as_in_caffe2():
    """The Multi-GPU tutorial's update: GetParams() inside the builder names this replica's parameters, and a
    blob named from one (a BlobReference plus a string) stays in its scope."""
    seen = []

    def forward(model, loss_scale):
        seen.append((core.CurrentNameScope(), core.CurrentDeviceScope()))
        logits = brew.fc(model, "data", "fc", 6, 3)
        with core.NameScope("head"):
            logits = brew.fc(model, logits, "fc2", 3, 3)
        _, loss = brew.softmax_with_loss(model, [logits, "label"], ["softmax", "loss"])
        return [brew.scale(model, loss, "scaled_loss", scale=loss_scale)]

    def update(model):
        params = model.GetParams()
        seen.append(params)
        lr = model.param_init_net.ConstantFill([], "lr", shape=[1], value=-0.1)
        one = model.param_init_net.ConstantFill([], "one", shape=[1], value=1.0)
        for param in params:
            momentum = model.param_init_net.ConstantFill([param], param + "_momentum", value=0.0)
            assert isinstance(momentum, core.BlobReference) and momentum == param + "_momentum"
            model.net.WeightedSum([param, one, model.param_to_grad[param], lr], param)

    model = model_helper.ModelHelper(name="tutorial_update")
    data_parallel_model.Parallelize_CPU(model, input_builder_fun=lambda m: None, forward_pass_builder_fun=forward,
                                        param_update_builder_fun=update, devices=[0, 1])
    assert seen == [("cpu_0/", core.DeviceOption(core.CPU, 0)), ("cpu_1/", core.DeviceOption(core.CPU, 1)),
                    ["cpu_0/fc_w", "cpu_0/fc_b", "cpu_0/head/fc2_w", "cpu_0/head/fc2_b"],
                    ["cpu_1/fc_w", "cpu_1/fc_b", "cpu_1/head/fc2_w", "cpu_1/head/fc2_b"]]
    outputs = {output for op in model.param_init_net.Proto().op for output in op.output}
    assert {"cpu_0/fc_w_momentum", "cpu_1/head/fc2_b_momentum", "cpu_1/lr"} <= outputs
    assert core.CurrentNameScope() == "" and core.CurrentDeviceScope() is None


def test_a_blob_reference_plus_a_string_is_a_blob_reference():
    ref = core.BlobReference("gpu_0/fc_w")
    assert type(ref + "_grad") is core.BlobReference and ref + "_grad" == "gpu_0/fc_w_grad"
    assert type("old_" + ref) is core.BlobReference and "old_" + ref == "old_gpu_0/fc_w"
    with pytest.raises(TypeError, match="a BlobReference adds strings only, not int"):
        ref + 1


def test_an_optimizer_before_the_gradients_says_what_to_call():
    model = model_helper.ModelHelper(name="no_gradients")
    logits = brew.fc(model, "data", "fc", 4, 3)
    brew.softmax_with_loss(model, [logits, "label"], ["softmax", "loss"])
    ops = len(model.net.Proto().op)
    with pytest.raises(InvalidInput, match=r"^model 'no_gradients' has no gradients yet: call "
                                           r"AddGradientOperators\(losses\) before adding the optimizer$"):
        optimizer.build_sgd(model, base_learning_rate=0.1)
    assert len(model.net.Proto().op) == ops, "the refused call added nothing"
    with pytest.raises(AttributeError, match="lockstep does that with lockstep.checkpoint.save"):
        model.net.Save(["fc_w"], [])


def test_a_second_backward_pass_or_optimizer_is_refused():
    model = model_helper.ModelHelper(name="twice")
    logits = brew.fc(model, "data", "fc", 4, 3)
    _, loss = brew.softmax_with_loss(model, [logits, "label"], ["softmax", "loss"])
    model.AddGradientOperators([loss])
    ops = len(model.net.Proto().op)
    with pytest.raises(InvalidInput, match=r"^model 'twice' has its backward pass already: call "
                                           r"AddGradientOperators once, with every loss$"):
        model.AddGradientOperators([loss])
    assert len(model.net.Proto().op) == ops
    optimizer.build_sgd(model, base_learning_rate=0.1)
    ops = len(model.net.Proto().op)
    with pytest.raises(InvalidInput, match=r"^model 'twice' has an optimizer already \('iter' counts its "
                                           r"steps\); build one$"):
        optimizer.build_sgd(model, base_learning_rate=0.1)
    assert len(model.net.Proto().op) == ops, "the refused call added nothing"


def test_a_checkpoint_of_other_shapes_says_it_is_another_models(tmp_path):
    def mine(labels):
        workspace.ResetWorkspace()
        model = model_helper.ModelHelper(name="mine")
        builders = fc_softmax_builders(0.5, 1, 8)
        builders["forward_pass_builder_fun"] = lambda m, scale: [brew.fc(m, "data", "fc", 6, labels)]
        builders["param_update_builder_fun"] = None
        data_parallel_model.Parallelize_CPU(model, **builders)
        workspace.RunNetOnce(model.param_init_net)
        return model

    checkpoint.save(tmp_path / "mine.safetensors", mine(3))
    with pytest.raises(InvalidInput, match=r"'fc_w' is float32 \(3, 6\) but the model has float32 \(4, 6\): was it "
                                           r"saved from another model\?$"):
        checkpoint.load(tmp_path / "mine.safetensors", mine(4))


def test_a_model_named_like_a_zoo_model_but_built_otherwise_is_not_saved_as_it(tmp_path):
    workspace.ResetWorkspace()
    model = model_helper.ModelHelper(name="lenet")
    builders = fc_softmax_builders(0.5, 1, 8)
    builders["param_update_builder_fun"] = None
    data_parallel_model.Parallelize_CPU(model, **builders)
    workspace.RunNetOnce(model.param_init_net)
    with pytest.raises(ValueError, match=r"named 'lenet' like a zoo model, .* did not build it; pass model_name="):
        checkpoint.save(tmp_path / "lenet_1.safetensors", model)
    assert not (tmp_path / "lenet_1.safetensors").exists()
    assert checkpoint.save(tmp_path / "lenet_1.safetensors", model, model_name="my_fc")["model"] == "my_fc"


def test_an_op_with_shared_buffers_names_its_blobs_as_the_model_built_them():
    def forward(model, loss_scale):
        x = brew.fc(model, brew.fc(model, "data", "fc1", 6, 4), "fc2", 5, 3)  # fc2 reads 4 values, not 5
        softmax, loss = brew.softmax_with_loss(model, [x, "label"], ["softmax", "loss"])
        return [brew.scale(model, loss, "scaled_loss", scale=loss_scale)]

    model = model_helper.ModelHelper(name="shared")
    builders = fc_softmax_builders(0.5, 1, 8)
    builders["forward_pass_builder_fun"] = forward
    data_parallel_model.Parallelize_CPU(model, **builders)
    assert any("__shared_" in blob for op in model.net.Proto().op for blob in op.output)
    workspace.RunNetOnce(model.param_init_net)
    workspace.FeedBlob("cpu_0/data", np.zeros((8, 6), np.float32))
    workspace.FeedBlob("cpu_0/label", np.zeros(8, np.int32))
    with pytest.raises(InvalidInput, match=r"^FC\(cpu_0/fc1, cpu_0/fc2_w, cpu_0/fc2_b\) -> cpu_0/fc2: W must be "
                                           r"\(M, 4\)"):
        workspace.RunNetOnce(model.net)


def test_gradients_reach_parameters_made_with_fills_as_in_caffe2():
    model = model_helper.ModelHelper(name="fills")
    w = model.param_init_net.XavierFill([], "w", shape=[3, 6])
    b = model.param_init_net.ConstantFill([], "b", shape=[3], value=0.0)
    softmax, loss = model.net.SoftmaxWithLoss([model.net.FC(["data", w, b], "fc"), "label"], ["softmax", "loss"])
    grads = model.AddGradientOperators([loss])
    assert {str(k): str(v) for k, v in grads.items()} == {"w": "w_grad", "b": "b_grad", "loss": "loss_grad"}
    assert model.param_to_grad == {}  # no registered parameter
    rng = np.random.default_rng(0)
    data, label = rng.standard_normal((4, 6)).astype(np.float32), np.array([0, 1, 2, 1], np.int32)
    workspace.FeedBlob("data", data)
    workspace.FeedBlob("label", label)
    workspace.RunNetOnce(model.param_init_net)
    weights = workspace.FetchBlob("w")
    workspace.RunNetOnce(model.net)
    p = np.exp(data @ weights.T)
    p /= p.sum(1, keepdims=True)
    p[np.arange(4), label] -= 1
    np.testing.assert_allclose(workspace.FetchBlob("w_grad"), p.T @ data / 4, rtol=1e-5, atol=1e-6)
