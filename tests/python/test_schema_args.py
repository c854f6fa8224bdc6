"""Operator arguments declared in the schemas, seen from Python: a misspelled or ill-typed argument to any
operator fails where the Python line adds it, naming the closest declared argument; the package reads the
defaults from the schemas (core.schema), so brew's layers and the operators cannot disagree. Run with
build/python on PYTHONPATH."""
import pytest

from lockstep import brew, core, model_helper
from lockstep._core import InvalidInput


def test_misspelled_argument_is_refused_with_the_closest_name():
    model = model_helper.ModelHelper(name="typo")
    no_arguments = r"Relu\(x\) -> y: unknown argument 'alpah'; Relu takes no arguments"
    with pytest.raises(InvalidInput, match=no_arguments):
        model.net.Relu(["x"], ["y"], alpah=3)
    with pytest.raises(InvalidInput, match="unknown argument 'alpah'; did you mean 'alpha'"):
        model.net.LeakyRelu(["x"], ["y"], alpah=0.2)
    with pytest.raises(InvalidInput, match="unknown argument 'strid'; did you mean 'stride'"):
        model.net.Conv(["x", "w"], ["y"], kernel=3, strid=2)
    with pytest.raises(InvalidInput, match="unknown argument 'valu'; did you mean 'value'"):
        model.param_init_net.ConstantFill([], ["c"], shape=[2], valu=1.0)
    assert [op.type for op in model.net.Proto().op] == []  # nothing was added


def test_wrong_type_and_out_of_range_are_refused():
    model = model_helper.ModelHelper(name="bad")
    with pytest.raises(InvalidInput, match="argument 'stride' must be an int, got the string \"2\""):
        model.net.Conv(["x", "w"], ["y"], stride="2")
    with pytest.raises(InvalidInput, match=r"argument 'ratio' must be in \[0, 1\), got 1.5"):
        model.net.Dropout(["x"], ["y", "mask"], ratio=1.5)
    model.net.LeakyRelu(["x"], ["y"], alpha=1)  # an int is a float argument's value, as in Caffe2 nets


def test_schema_catalogue_and_brew_defaults_agree():
    conv = core.schema("Conv")
    assert conv["doc"].startswith("2-D convolution")
    assert [i["name"] for i in conv["inputs"]] == ["X", "filter", "bias"]
    assert [i["optional"] for i in conv["inputs"]] == [False, False, True]
    assert conv["args"]["stride"]["type"] == "int" and conv["args"]["stride"]["default"] == 1
    assert conv["args"]["stride"]["min"] == 1
    assert "default" not in conv["args"]["kernel"]
    assert core.arg_defaults("SpatialBN")["epsilon"] == pytest.approx(1e-5)
    with pytest.raises(InvalidInput, match="unknown operator type 'Cnov'; did you mean Conv"):
        core.schema("Cnov")

    model = model_helper.ModelHelper(name="defaults")
    brew.conv(model, "data", "conv1", 1, 4, 3)
    brew.spatial_bn(model, "conv1", "bn1", 4)
    brew.dropout(model, "bn1", "drop1")
    net = model.net.Proto()
    conv_args = {a.name: a.i for a in net.op[0].arg}
    for name in ("stride", "pad", "dilation", "group"):
        assert conv_args[name] == core.arg_defaults("Conv")[name], name
    bn_args = {a.name: a for a in net.op[1].arg}
    assert bn_args["momentum"].f == pytest.approx(core.arg_defaults("SpatialBN")["momentum"])
    assert {a.name: a.f for a in net.op[2].arg}["ratio"] == core.arg_defaults("Dropout")["ratio"]
