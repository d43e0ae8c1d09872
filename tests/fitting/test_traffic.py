"""A model's memory traffic counted on the meta device, and the transfer guess that scales by it (issue 40)."""

import numpy as np
import pytest

from perfmodel.fitting.gpu_effects import Curve, rate, shipped_effects
from perfmodel.fitting.gpu_specs import load_gpu_specs
from perfmodel.fitting.regressors import RooflineRegression
from perfmodel.fitting.traffic import builders, count, count_elements, shipped_traffic, traffic_bytes
from perfmodel.fitting.transfer_guesses import guess_ratios, memory_share


def test_every_operator_reads_its_inputs_and_weights_and_writes_its_outputs():
    torch = pytest.importorskip("torch")

    def build():
        return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1, bias=False), torch.nn.ReLU())

    # conv: reads b*3*s*s and 4*3*3*3 weights, writes b*4*s*s; relu: reads and writes b*4*s*s
    for batch, size in ((1, 8), (2, 8), (3, 5)):
        assert count_elements(build, size, batch) == batch * size * size * (3 + 4 + 4 + 4) + 108
    assert count(build, (8,)) == {"per_image": {"8": 8 * 8 * 15}, "fixed": 108}


def test_the_shipped_counts_are_what_the_counter_gives():
    pytest.importorskip("torch")
    build, _ = builders()["resnet50"]
    assert count(build, (224,))["per_image"]["224"] == shipped_traffic()["resnet50"]["per_image"]["224"]
    per_work, fixed = traffic_bytes("resnet50", "fp16")
    assert 150e6 < per_work < 170e6 and 45e6 < fixed < 55e6  # ResNet-50 fp16: 162 MB an image, 51 MB of weights
    assert traffic_bytes("resnet50", "int8")[0] == per_work / 2 and traffic_bytes("bert-base-s128", "fp16") is None


def _curve(spec, latency_ms: float, traffic) -> Curve:
    roofline = RooflineRegression(intercept=False)
    roofline.floor_, roofline.intercept_, roofline.slope_, roofline.sharpness_, roofline.n_features_in_ = (
        0.01,
        0.0,
        latency_ms / 100.0,
        3.0,
        2,
    )
    b = np.array([1.0, 10.0, 100.0, 1000.0])
    s = np.full_like(b, 224.0)
    return Curve(("resnet50",), spec.hardware, "fp16", spec, roofline, b, s, b * latency_ms / 100.0, traffic=traffic)


def test_the_traffic_guess_scales_the_memory_share_by_bandwidth_and_the_rest_by_peak():
    specs = load_gpu_specs()
    h200, h100, a100 = specs["h200"], specs["h100"], specs["a100"]
    effects, w = shipped_effects(), np.array([10.0, 100.0, 1000.0])
    # 1 ms an image; a traffic of 0.1 ms an image at the H200's bandwidth: a tenth of the time is the memory's
    source = _curve(h200, 100.0, (h200.memory_bandwidth_gbs * 1e9 * 1e-4, 0.0))
    assert memory_share(source, w) == pytest.approx(0.1)
    peak, bandwidth = rate(h200, "fp16") / rate(a100, "fp16"), h200.memory_bandwidth_gbs / a100.memory_bandwidth_gbs
    assert np.exp(guess_ratios("traffic", source, a100, "fp16", effects, w)[1]) == pytest.approx(
        0.9 * peak + 0.1 * bandwidth
    )
    # equal fp16 peaks: only the memory's share moves, by the bandwidth ratio (4.3% slower on the H100 here)
    busy = guess_ratios("traffic", source, h100, "fp16", effects, w)[1]
    assert np.exp(busy) == pytest.approx(1 + 0.1 * (4800 / 3350 - 1))
    # a time shorter than the traffic at full bandwidth: all of it is the memory's
    quick = _curve(h200, 1.0, source.traffic)
    assert memory_share(quick, w) == pytest.approx(1.0)
    assert guess_ratios("traffic", quick, a100, "fp16", effects, w)[1] == pytest.approx(np.log(bandwidth))
    # a model not counted: the GPU effects, as the method
    plain = _curve(h200, 100.0, None)
    assert guess_ratios("traffic", plain, a100, "fp16", effects, w) == guess_ratios(
        "method", plain, a100, "fp16", effects, w
    )
