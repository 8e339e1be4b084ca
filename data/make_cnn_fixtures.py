#!/usr/bin/env python3
"""Make CNN, audio, Hugging Face and scikit-learn fixtures in data/onnx/.

lumen imports each model (`lumen run data/onnx/NAME.onnx --inputs data/onnx/NAME.inputs.safetensors
--expect data/onnx/NAME.expect.safetensors`) and must reproduce onnxruntime's outputs within
1e-4 x max(1, |reference|); `cargo test` reads these files and needs no Python. The companion of
make_onnx_fixtures.py (same conventions): convolution networks, an audio RNN, a Hugging Face
export and scikit-learn conversions, each made by the real tool (torch.onnx's TorchScript
exporter, transformers + torch.onnx, skl2onnx), with random or briefly fitted weights.

How to run it (from the repository root; it takes about 20 s on 2 cores, imports included):

    python3 -m pip install torch==2.15.0 transformers==5.23.0 scikit-learn==1.9.1 \\
        skl2onnx==1.20.0 onnx==1.23.2 onnxruntime==1.32.0 numpy==2.4.6 safetensors==0.8.0
    python3 data/make_cnn_fixtures.py [NAME ...]   # all fixtures, or the ones named

(made with those versions on Python 3.11, pulling in scipy 1.17.1 and protobuf 7.36.2; torch came
from PyPI, the CPU-only wheel index being out of reach here; only the CPU is used.)

Each NAME.onnx lies beside NAME.inputs.safetensors and NAME.expect.safetensors, with tensors keyed
by graph input and output name. Floating inputs and outputs are float32 and integer ones int64
(an integer output stays int64 in the expect file, unlike make_onnx_fixtures.py, which casts
everything to float32). Expected outputs come from onnxruntime 1.32 (CPU, all graph
optimisations off, so they are the model's own arithmetic); the script reloads both files, reruns
onnxruntime on what it stored and asserts the same result, and prints how far onnxruntime is from
the source framework (all within 7e-6 relative). Everything is seeded and torch runs on one thread;
two runs write identical bytes (skl2onnx's random graph name is replaced by the fixture's name via
convert_sklearn(name=...)). BatchNorm layers have random affine weights and running statistics
averaged over 4 train-mode passes on random batches (momentum None), then eval(). The last Linear
of the classifiers is scaled up so logits are O(1).

Fixtures (sizes of NAME.onnx; node counts by op_type as the script prints them):

 NAME                     opset_import             graph
 resnet_tiny_op11         ai.onnx 11               93.7 kB; x [2,3,32,32] -> logits [2,10]
     Add x4, Conv x11, Flatten, Gemm, GlobalAveragePool, MaxPool, Relu x9
     torchvision-style ResNet: 7x7/2 stem conv+BN+ReLU, MaxPool 3x3/2 pad 1, stages 8/16/32
     channels with 2/1/1 BasicBlocks, strided 1x1 conv+BN downsample shortcuts, residual Add
     then Relu, AdaptiveAvgPool2d(1), flatten, Linear. Exported with do_constant_folding=True:
     the exporter folds every BatchNorm into its Conv (weights and a new Conv bias): no
     BatchNormalization node is left.
 resnet_tiny_op17         ai.onnx 17               101.2 kB; x [2,3,32,32] -> logits [2,10]
     Add x4, BatchNormalization x11, Conv x11, Flatten, Gemm, GlobalAveragePool, MaxPool, Relu x9
     the same network exported with do_constant_folding=False: the 11 BatchNormalization
     nodes stay, after bias-free Convs (inference form: one output, epsilon 1e-5, and the
     attributes momentum 1.0 and training_mode 0 written out).
 mobilenet_tiny_op11      ai.onnx 11               145.0 kB; x [2,3,32,32] -> logits [2,10]
     Add x3, Clip x5, Constant x10, Conv x20, Flatten, Gemm x2, GlobalAveragePool x3,
     HardSigmoid x9, Mul x9, Relu x2
     MobileNetV2/V3-style: 3x3/2 stem + Hardswish, inverted residual blocks (1x1 expand, depthwise
     3x3 with group = channels, stride 1 and 2, 1x1 project, residual Add when the shape is
     kept), ReLU6 as Clip(x, min, max) with min 0 and max 6 as Constant inputs, two blocks with
     Hardswish and a squeeze-excite (GlobalAveragePool, 1x1 Conv, Relu, 1x1 Conv, HardSigmoid,
     Mul), 1x1 conv + Hardswish, pool, Linear-Hardswish-Dropout-Linear head. Opset 11 has no
     HardSwish: the exporter writes x * HardSigmoid(x) with alpha 1/6 (float32 0.16666667),
     beta 0.5 (the default, not written); the SE's Hardsigmoid is HardSigmoid with the same
     alpha. BatchNorm folded (constant folding on).
 mobilenet_tiny_op17      ai.onnx 17               143.8 kB; x [2,3,32,32] -> logits [2,10]
     Add x3, Clip x5, Constant x10, Conv x20, Flatten, Gemm x2, GlobalAveragePool x3,
     HardSigmoid x2, HardSwish x7, Mul x2, Relu x2
     the same network at opset 17: Hardswish becomes the HardSwish op.
 yolo_tiny_op17           ai.onnx 17               216.5 kB; images [1,3,64,64] ->
                                                   p3 [1,10,16,16], p4 [1,10,8,8]
     Add x3, Concat x7, Constant x4, Conv x28, MaxPool x3, Mul x26, Resize x2, Sigmoid x26, Split x4
     YOLOv8-style: Conv+BN+SiLU blocks (SiLU exported as x * Sigmoid(x); BN folded), C2f blocks
     (Split of a 1x1 conv into halves with a constant `split` input, bottlenecks with and
     without shortcut, Concat), SPPF (MaxPool k5 s1 p2 three times in a chain, Concat of 4),
     nn.Upsample(scale_factor=2, nearest) as Resize(X, '', scales [1,1,2,2]) with
     coordinate_transformation_mode asymmetric and nearest_mode floor, Concat with earlier
     feature maps, two heads (3x3 conv, 1x1 conv to 4 box + 6 class channels) at strides 4 and 8.
 segment_tiny_op13        ai.onnx 13               66.9 kB; x [1,3,32,32] -> logits [1,5,32,32]
     Add, AveragePool, Cast x2, Concat x6, Constant x19, ConstantOfShape, Conv x7,
     ConvTranspose x2, Gather x2, Pad, Relu x5, Reshape x2, Resize x2, Shape x4, Slice x3,
     Transpose, Unsqueeze x2
     an encoder-decoder: nn.ReflectionPad2d(1) then a pad-0 conv, a stride-2 conv, AvgPool2d(3,
     stride 2, pad 1, ceil_mode=True, count_include_pad=False) taking 16x16 to 9x9 (the last
     window hangs over the edge), a dilation-2 conv, ConvTranspose2d(k3, s2, pad 1,
     output_padding 1) 9x9 -> 18x18, F.interpolate(size=16x16, bilinear, align_corners=False)
     (a downscale: Resize linear half_pixel), skip Concat, ConvTranspose2d(k2, s2), a side branch
     F.interpolate(size=32x32, bilinear, align_corners=True) (Resize linear align_corners), Add,
     1x1 conv head. BN folded. The Pad's pads input is computed in the graph the way the
     exporter writes it (ConstantOfShape, Concat, Reshape, Slice with step -1, Transpose,
     Reshape, Cast: not folded, since torch folds no Slice with a step other than 1), and both
     Resizes take a `sizes` input built from Shape/Gather/Slice/Concat/Cast (roi and scales '').
 audio_lstm_op17          ai.onnx 17               34.4 kB; audio [2,1,400] -> logits [2,100,12]
     Add, Concat x3, Constant x16, Conv x2, Expand x3, GRU, Gather x3, LSTM, MatMul, Relu x2,
     Reshape, Shape x3, Squeeze, Transpose x3, Unsqueeze x3
     two Conv1d(stride 2)+BN(folded)+ReLU (400 -> 200 -> 100 frames, 16 channels), transpose to
     [B, T, C], nn.LSTM(16, 16, batch_first) as one LSTM node (time-major: Transpose before,
     Squeeze of num_directions after; zero initial_h/initial_c made by Expand of a constant to
     [1, B, 16] with B read by Shape/Gather), bidirectional nn.GRU(16, 16) as one GRU node
     (direction bidirectional, linear_before_reset 1, initial_h [2, B, 16] by Expand), its
     [T, 2, B, 16] output Transposed/Reshaped to [B, T, 32], Linear as MatMul + Add. Input: two
     sines plus noise.
 bert_hf_op17             ai.onnx 17               119.8 kB; input_ids, attention_mask,
                                                   token_type_ids int64 [2,12] ->
                                                   sentence_embedding [2,32],
                                                   last_hidden_state [2,12,32]
     Add x23, And x2, Cast x4, Clip, Concat, Constant x43, ConstantOfShape x3, Div x3, Equal x2,
     Erf x2, Expand x2, Flatten, Gather x5, GreaterOrEqual, IsNaN x2, LayerNormalization x5,
     MatMul x16, Mul x12, ReduceSum x2, Reshape x12, Shape x2, Softmax x2, Transpose x8,
     Unsqueeze, Where x6
     transformers' BertModel (BertConfig vocab 100, hidden 32, 2 layers, 2 heads, intermediate
     64, max_position 64; default attention implementation, SDPA; every parameter given noise
     N(0, 0.05) so no bias is 0 and no LayerNorm scale is 1: with the untouched init, the
     exporter shares the equal initializers through 19 Identity nodes) under sentence-
     transformers' mean pooling (mask.unsqueeze(-1).expand(hidden.size()).float(), sum over
     tokens / clamp(mask sum, min=1e-9): the clamp is Clip(x, 1e-9, '')). Row 1 is padded after
     8 tokens; token_type_ids are 1 from position 6 on (0 on padding). The mask path is
     transformers 5's: Cast of the int64 mask to bool, an advanced-indexing Gather
     (Flatten/Mul/Add/Gather), And with constant GreaterOrEqual, Expand to [2, 1, 12, 12];
     torch's SDPA decomposition then makes Where(mask, 0, -inf), scales q and k by 0.5 each
     (sqrt of 1/sqrt(16)), Softmax, and Where(IsNaN(p), 0, p). GELU is erf-exact (Div by
     sqrt 2, Erf, Add 1, Mul, Mul 0.5). position ids are a constant [1, 12] Gather.
 llama_step_op17          ai.onnx 17               195.6 kB; input_ids int64
                                                   [1,3], attention_mask int64 [1,8],
                                                   position_ids int64 [1,3], past.{0,1}.{key,value}
                                                   [1,2,5,8] -> logits [1,3,96],
                                                   present.{0,1}.{key,value} [1,2,8,8]
     Add x18, And x2, Cast x28, Concat x30, Constant x214, ConstantOfShape x6, Cos, Div x9,
     Equal x5, Expand x5, Flatten, Gather x36, IsNaN x2, LessOrEqual, MatMul x19, Mul x39, Neg x4,
     Pow x5, Range x3, ReduceMean x5, Reshape x21, Shape x40, Sigmoid x2, Sin, Slice x8,
     Softmax x2, Sqrt x5, Transpose x10, Unsqueeze x81, Where x9
     One decoder step with a KV cache, as an ONNX decoder export for generation is made:
     transformers' LlamaForCausalLM (LlamaConfig vocab 96, hidden 32, 2 layers, 4 heads, 2
     key/value heads, intermediate 64, max_position 64, rope_theta 10000, untied embeddings,
     every parameter given noise N(0, 0.05)) wrapped so past keys/values go in as a
     DynamicCache and the updated cache comes out; exported by torch.onnx's TorchScript exporter
     with dynamic query, past and total lengths (traced with a past of 3 and 2 query tokens so
     the general causal-mask path is recorded). The past is the model's own cache after a
     5-token prefix, then 3 new tokens at positions 5-7: rotary tables by Sin/Cos of position
     times inverse frequency, RMSNorm as Pow/ReduceMean/Sqrt/Div, grouped-query heads by
     Expand, the cache by Concat, the mask by Range/LessOrEqual/And.
 sklearn_logreg_default   ai.onnx 9, ai.onnx.ml 1  3.9 kB; X [50,64] -> output_label int64 [50]
     LinearClassifier, Cast, Normalizer, ZipMap  (Cast in ai.onnx, the rest in ai.onnx.ml)
     LogisticRegression(max_iter=2000) (lbfgs, multinomial) fitted on sklearn's bundled digits
     (raw pixel values 0-16, 50 stratified test rows held out as X) and converted with skl2onnx's
     default options: LinearClassifier (multi_class 1, post_transform SOFTMAX, classlabels_ints
     0-9) -> label, probability_tensor; Cast(label, to int64) -> `output_label` [N];
     Normalizer(norm L1) of the probabilities, then ZipMap(classlabels_int64s 0-9) ->
     `output_probability`, a sequence of 50 maps int64 -> float. That output is not a tensor
     and is LEFT OUT of the expect file, which holds `output_label` only. No ArgMax or
     ArrayFeatureExtractor: the label comes from LinearClassifier itself. skl2onnx picks the
     smallest opsets that hold these ops (ai.onnx 9 for Cast).
 sklearn_logreg_nozipmap  ai.onnx 22 (listed twice), ai.onnx.ml 1
                                                   3.7 kB; X [50,64] -> label int64 [50],
                                                   probabilities float32 [50,10]
     LinearClassifier, Normalizer  (both ai.onnx.ml)
     the same classifier converted with options {zipmap: False}: no Cast, no ZipMap; `label`
     comes straight from LinearClassifier (int64), `probabilities` from Normalizer(L1).
 sklearn_pipeline         ai.onnx 22 (listed twice), ai.onnx.ml 1
                                                   1.3 kB; X [50,64] -> variable float32 [50,1]
     Scaler, Normalizer, LinearRegressor  (all ai.onnx.ml)
     Pipeline(StandardScaler, Normalizer (l2), LinearRegression) fitted on the digits (target:
     the digit as a float): Scaler (offset = mean, scale = 1/std, 1 for the constant pixels),
     Normalizer(norm L2), LinearRegressor (one target, one intercept).

Surprises worth knowing: with no standard-domain node in the graph, skl2onnx 1.20 writes the
default-domain opset_import ('', 22) twice (onnx.checker and onnxruntime accept it); the torch
exporter fuses BatchNorm into Conv whenever constant folding is on, whatever the opset; all the
torch graphs use fixed shapes (no dynamic axes), yet shape arithmetic (Shape, Gather, Expand,
ConstantOfShape, Slice) is left in segment, audio and bert for the importer to fold.
"""

import collections
import os
import sys
import time
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import torch
from safetensors.numpy import load_file, save_file
from torch import nn
from torch.nn import functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "onnx")


# ---------------------------------------------------------------------------------------------
# Shared helpers


def run_ort(path, inputs):
    """onnxruntime on the CPU with every graph optimisation off: the model's own arithmetic."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, inputs)))


def as_stored(value):
    """A tensor as the fixture stores it: floats as float32, integers as int64."""
    value = np.asarray(value)
    if value.dtype.kind == "f":
        return np.ascontiguousarray(value, dtype=np.float32)
    if value.dtype.kind in "iub":
        return np.ascontiguousarray(value, dtype=np.int64)
    raise TypeError(f"cannot store a {value.dtype} tensor")


def summary(model):
    """'opset ...; domains ...; ops Name xN, ...' for a loaded ONNX model."""
    opsets = ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in
                       sorted((o.domain, o.version) for o in model.opset_import))
    counts = collections.Counter((n.domain or "ai.onnx", n.op_type) for n in model.graph.node)
    domains = sorted({d for d, _ in counts})
    ops = ", ".join(f"{op} x{c}" if c > 1 else op
                    for (_, op), c in sorted(counts.items(), key=lambda kv: kv[0][1]))
    return f"opset {opsets}; node domains {', '.join(domains)}; ops {ops}"


def save_case(name, inputs, reference=None):
    """Check NAME.onnx, run onnxruntime on `inputs`, write NAME.inputs/expect.safetensors.

    Outputs that are not tensors (ZipMap's sequence of maps) are left out of the expect file.
    `reference` maps output names to the source framework's own results, compared for the
    printed report only (onnxruntime's outputs are what the fixture stores)."""
    path = os.path.join(OUT, f"{name}.onnx")
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    inputs = {k: as_stored(v) for k, v in inputs.items()}
    graph_inputs = [i.name for i in model.graph.input]
    assert sorted(graph_inputs) == sorted(inputs), (graph_inputs, list(inputs))
    outputs = run_ort(path, inputs)
    expect, skipped = {}, []
    for key, value in outputs.items():
        if isinstance(value, np.ndarray):
            expect[key] = as_stored(value)
        else:
            skipped.append(f"{key} ({type(value).__name__} of {type(value[0]).__name__})")
    inputs_path = os.path.join(OUT, f"{name}.inputs.safetensors")
    expect_path = os.path.join(OUT, f"{name}.expect.safetensors")
    save_file(inputs, inputs_path)
    save_file(expect, expect_path)

    # Reload both files and rerun onnxruntime on what was stored.
    stored_inputs, stored_expect = load_file(inputs_path), load_file(expect_path)
    rerun = run_ort(path, stored_inputs)
    for key, value in stored_expect.items():
        assert value.dtype in (np.float32, np.int64), (key, value.dtype)
        assert value.dtype == (np.float32 if rerun[key].dtype.kind == "f" else np.int64)
        assert np.array_equal(value, rerun[key]), key
    for key, value in stored_inputs.items():
        assert value.dtype in (np.float32, np.int64), (key, value.dtype)

    size = os.path.getsize(path)
    params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    print(f"{name}: {size} bytes, {len(model.graph.node)} nodes, {params} initializer values")
    print(f"  {summary(model)}")
    print("  inputs  " + ", ".join(f"{k} {v.dtype} {list(v.shape)}"
                                    for k, v in stored_inputs.items()))
    print("  expect  " + ", ".join(f"{k} {v.dtype} {list(v.shape)}"
                                    for k, v in stored_expect.items()))
    if skipped:
        print("  left out of expect (not tensors): " + ", ".join(skipped))
    for key, value in (reference or {}).items():
        if key not in stored_expect:
            continue
        got = stored_expect[key]
        if got.dtype == np.int64:
            print(f"  {key}: {int((got != value).sum())} of {got.size} differ from the source")
        else:
            err = np.max(np.abs(got - value) / np.maximum(1.0, np.abs(value)))
            print(f"  {key}: std {got.std():.4g}, max rel diff vs source {err:.2e}")


def calibrate_batchnorm(model, make_batch, passes=4, seed=0):
    """Non-trivial BatchNorm statistics: random affine weights, then running mean/var averaged
    (momentum None) over a few train-mode forward passes on random batches; then eval()."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.weight.copy_(torch.rand(m.weight.shape, generator=gen) + 0.5)
                m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.2)
                m.reset_running_stats()
                m.momentum = None
        model.train()
        for _ in range(passes):
            model(*make_batch(gen))
    return model.eval()


def export_torch(name, model, args, input_names, output_names, opset, folding=True):
    """torch.onnx's TorchScript exporter (dynamo=False) at a fixed shape; returns torch's own
    outputs as numpy for comparison."""
    path = os.path.join(OUT, f"{name}.onnx")
    model.eval()
    with torch.no_grad():
        torch.onnx.export(model, args, path, input_names=input_names, output_names=output_names,
                          opset_version=opset, do_constant_folding=folding, dynamo=False)
        result = model(*args)
    if isinstance(result, torch.Tensor):
        result = (result,)
    return {k: v.numpy() for k, v in zip(output_names, result)}


def widen(linear, factor):
    """Scale a classifier's last Linear so logits are O(1): 1e-4 of a tiny logit checks little."""
    with torch.no_grad():
        linear.weight.mul_(factor)
        linear.bias.mul_(factor)


def image_batch(shape):
    return lambda gen: (torch.randn(shape, generator=gen),)


# ---------------------------------------------------------------------------------------------
# ResNet


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        shortcut = x if self.downsample is None else self.downsample(x)
        return F.relu(y + shortcut)


class ResNetTiny(nn.Module):
    """torchvision's ResNet layout, narrowed: 7x7/2 stem, max pool, stages of BasicBlocks."""

    def __init__(self, widths=(8, 16, 32), blocks=(2, 1, 1), classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, widths[0], 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        layers, cin = [], widths[0]
        for i, (width, count) in enumerate(zip(widths, blocks)):
            stage = []
            for j in range(count):
                stage.append(BasicBlock(cin, width, 2 if i > 0 and j == 0 else 1))
                cin = width
            layers.append(nn.Sequential(*stage))
        self.layers = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
        x = self.avgpool(self.layers(x))
        return self.fc(torch.flatten(x, 1))


def resnet(name, opset, folding):
    torch.manual_seed(10)
    model = calibrate_batchnorm(ResNetTiny(), image_batch((8, 3, 32, 32)), seed=10)
    widen(model.fc, 4.0)
    x = torch.randn(2, 3, 32, 32)
    ref = export_torch(name, model, (x,), ["x"], ["logits"], opset, folding)
    save_case(name, {"x": x.numpy()}, ref)


# ---------------------------------------------------------------------------------------------
# MobileNet


class SqueezeExcite(nn.Module):
    def __init__(self, channels, squeezed):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeezed, 1)
        self.fc2 = nn.Conv2d(squeezed, channels, 1)

    def forward(self, x):
        s = F.hardsigmoid(self.fc2(F.relu(self.fc1(self.pool(x)))))
        return x * s


class InvertedResidual(nn.Module):
    """MobileNetV2/V3 block: 1x1 expand, depthwise 3x3 (stride 1 or 2), optional SE, 1x1
    project; residual when the shape is kept."""

    def __init__(self, cin, expanded, cout, stride, act, se):
        super().__init__()
        layers = []
        if expanded != cin:
            layers += [nn.Conv2d(cin, expanded, 1, bias=False), nn.BatchNorm2d(expanded), act()]
        layers += [nn.Conv2d(expanded, expanded, 3, stride, 1, groups=expanded, bias=False),
                   nn.BatchNorm2d(expanded), act()]
        if se:
            layers.append(SqueezeExcite(expanded, max(8, expanded // 4)))
        layers += [nn.Conv2d(expanded, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.block(x)
        return x + y if self.residual else y


class MobileNetTiny(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16),
                                  nn.Hardswish())
        self.blocks = nn.Sequential(
            InvertedResidual(16, 16, 16, 1, nn.ReLU6, False),      # depthwise only, residual
            InvertedResidual(16, 48, 24, 2, nn.ReLU6, False),      # V2 block, stride 2
            InvertedResidual(24, 72, 24, 1, nn.ReLU6, False),      # V2 block, residual
            InvertedResidual(24, 72, 32, 2, nn.Hardswish, True),   # V3 block with SE, stride 2
            InvertedResidual(32, 96, 32, 1, nn.Hardswish, True),   # V3 block with SE, residual
        )
        self.last = nn.Sequential(nn.Conv2d(32, 64, 1, bias=False), nn.BatchNorm2d(64),
                                  nn.Hardswish())
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Sequential(nn.Linear(64, 48), nn.Hardswish(), nn.Dropout(0.2),
                                  nn.Linear(48, classes))

    def forward(self, x):
        x = self.pool(self.last(self.blocks(self.stem(x))))
        return self.head(torch.flatten(x, 1))


def mobilenet(name, opset):
    torch.manual_seed(20)
    model = calibrate_batchnorm(MobileNetTiny(), image_batch((8, 3, 32, 32)), seed=20)
    widen(model.head[3], 12.0)
    x = torch.randn(2, 3, 32, 32)
    ref = export_torch(name, model, (x,), ["x"], ["logits"], opset)
    save_case(name, {"x": x.numpy()}, ref)


# ---------------------------------------------------------------------------------------------
# YOLO-style detector


class ConvBnSiLU(nn.Module):
    def __init__(self, cin, cout, k=1, s=1):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, s, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        return F.silu(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    def __init__(self, c, shortcut):
        super().__init__()
        self.cv1, self.cv2 = ConvBnSiLU(c, c, 3), ConvBnSiLU(c, c, 3)
        self.shortcut = shortcut

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.shortcut else y


class C2f(nn.Module):
    """Ultralytics-style C2f: 1x1 conv to 2c, split in halves, n bottlenecks chained on the
    second half, every intermediate concatenated, 1x1 conv out."""

    def __init__(self, cin, cout, n=1, shortcut=True):
        super().__init__()
        self.c = cout // 2
        self.cv1 = ConvBnSiLU(cin, 2 * self.c)
        self.cv2 = ConvBnSiLU((2 + n) * self.c, cout)
        self.m = nn.ModuleList(Bottleneck(self.c, shortcut) for _ in range(n))

    def forward(self, x):
        parts = list(self.cv1(x).split((self.c, self.c), 1))
        for m in self.m:
            parts.append(m(parts[-1]))
        return self.cv2(torch.cat(parts, 1))


class SPPF(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        hidden = cin // 2
        self.cv1 = ConvBnSiLU(cin, hidden)
        self.cv2 = ConvBnSiLU(hidden * 4, cout)
        self.pool = nn.MaxPool2d(5, 1, 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.pool(x)
        y2 = self.pool(y1)
        y3 = self.pool(y2)
        return self.cv2(torch.cat((x, y1, y2, y3), 1))


class YoloTiny(nn.Module):
    """Backbone (strides 2..16), SPPF, a top-down neck (nearest upsample + concat) and two
    detection heads (4 box + `classes` scores per cell) at strides 4 and 8 of the input."""

    def __init__(self, classes=6):
        super().__init__()
        self.stem = ConvBnSiLU(3, 8, 3, 2)                                   # 32x32
        self.down1 = ConvBnSiLU(8, 16, 3, 2)                                 # 16x16
        self.c2f1 = C2f(16, 16, 1, True)
        self.down2 = ConvBnSiLU(16, 32, 3, 2)                                # 8x8
        self.c2f2 = C2f(32, 32, 2, True)
        self.down3 = ConvBnSiLU(32, 32, 3, 2)                                # 4x4
        self.sppf = SPPF(32, 32)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.neck1 = C2f(64, 32, 1, False)                                   # 8x8
        self.neck2 = C2f(48, 16, 1, False)                                   # 16x16
        self.head_small = nn.Sequential(ConvBnSiLU(16, 16, 3), nn.Conv2d(16, 4 + classes, 1))
        self.head_large = nn.Sequential(ConvBnSiLU(32, 16, 3), nn.Conv2d(16, 4 + classes, 1))

    def forward(self, x):
        p3 = self.c2f1(self.down1(self.stem(x)))
        p4 = self.c2f2(self.down2(p3))
        p5 = self.sppf(self.down3(p4))
        n4 = self.neck1(torch.cat((self.up(p5), p4), 1))
        n3 = self.neck2(torch.cat((self.up(n4), p3), 1))
        return self.head_small(n3), self.head_large(n4)


def yolo_tiny():
    torch.manual_seed(30)
    model = calibrate_batchnorm(YoloTiny(), image_batch((4, 3, 64, 64)), seed=30)
    x = torch.randn(1, 3, 64, 64)
    ref = export_torch("yolo_tiny_op17", model, (x,), ["images"], ["p3", "p4"], 17)
    save_case("yolo_tiny_op17", {"images": x.numpy()}, ref)


# ---------------------------------------------------------------------------------------------
# Segmentation encoder-decoder


def conv_bn_relu(cin, cout, k=3, s=1, p=1, d=1):
    return nn.Sequential(nn.Conv2d(cin, cout, k, s, p, dilation=d, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU())


class SegmentTiny(nn.Module):
    def __init__(self, classes=5):
        super().__init__()
        self.pad = nn.ReflectionPad2d(1)
        self.enc1 = conv_bn_relu(3, 8, p=0)                                   # 32x32
        self.enc2 = conv_bn_relu(8, 16, s=2)                                  # 16x16
        self.pool = nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False)  # 9x9
        self.enc3 = conv_bn_relu(16, 24, p=2, d=2)                           # 9x9, dilated
        self.up1 = nn.ConvTranspose2d(24, 16, 3, 2, 1, output_padding=1)     # 18x18
        self.dec1 = conv_bn_relu(32, 16)
        self.up2 = nn.ConvTranspose2d(16, 8, 2, 2)                           # 32x32
        self.dec2 = conv_bn_relu(16, 8)
        self.aux = nn.Conv2d(24, 8, 1)
        self.head = nn.Conv2d(8, classes, 1)

    def forward(self, x):
        f1 = self.enc1(self.pad(x))
        f2 = self.enc2(f1)
        f3 = self.enc3(self.pool(f2))
        u = F.interpolate(self.up1(f3), size=f2.shape[-2:], mode="bilinear", align_corners=False)
        d = self.dec1(torch.cat((u, f2), 1))
        d = self.dec2(torch.cat((self.up2(d), f1), 1))
        aux = F.interpolate(self.aux(f3), size=x.shape[-2:], mode="bilinear", align_corners=True)
        return self.head(d + aux)


def segment_tiny():
    torch.manual_seed(40)
    model = calibrate_batchnorm(SegmentTiny(), image_batch((4, 3, 32, 32)), seed=40)
    x = torch.randn(1, 3, 32, 32)
    ref = export_torch("segment_tiny_op13", model, (x,), ["x"], ["logits"], 13)
    save_case("segment_tiny_op13", {"x": x.numpy()}, ref)


# ---------------------------------------------------------------------------------------------
# Audio


class AudioLSTM(nn.Module):
    def __init__(self, classes=12):
        super().__init__()
        self.front = nn.Sequential(
            nn.Conv1d(1, 16, 9, 2, 4, bias=False), nn.BatchNorm1d(16), nn.ReLU(),   # 200
            nn.Conv1d(16, 16, 5, 2, 2, bias=False), nn.BatchNorm1d(16), nn.ReLU())  # 100
        self.lstm = nn.LSTM(16, 16, num_layers=1, batch_first=True)
        self.gru = nn.GRU(16, 16, num_layers=1, batch_first=True, bidirectional=True)
        self.out = nn.Linear(32, classes)

    def forward(self, audio):
        x = self.front(audio).transpose(1, 2)       # [B, T, C]
        x, _ = self.lstm(x)
        x, _ = self.gru(x)
        return self.out(x)


def audio_lstm():
    torch.manual_seed(50)
    model = calibrate_batchnorm(AudioLSTM(), image_batch((4, 1, 400)), seed=50)
    widen(model.out, 6.0)
    t = torch.arange(400, dtype=torch.float32) / 400.0
    audio = (0.5 * torch.sin(2 * np.pi * torch.tensor([[11.0], [23.0]]) * t)
             + 0.1 * torch.randn(2, 400)).unsqueeze(1)
    ref = export_torch("audio_lstm_op17", model, (audio,), ["audio"], ["logits"], 17)
    save_case("audio_lstm_op17", {"audio": audio.numpy()}, ref)


# ---------------------------------------------------------------------------------------------
# Hugging Face BERT with sentence-transformers mean pooling


class MeanPooledBert(nn.Module):
    def __init__(self, bert):
        super().__init__()
        self.bert = bert

    def forward(self, input_ids, attention_mask, token_type_ids):
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                           token_type_ids=token_type_ids).last_hidden_state
        mask = attention_mask.unsqueeze(-1).expand(hidden.size()).float()
        pooled = torch.sum(hidden * mask, 1) / torch.clamp(mask.sum(1), min=1e-9)
        return pooled, hidden


def bert_hf():
    from transformers import BertConfig, BertModel

    torch.manual_seed(60)
    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    model = MeanPooledBert(BertModel(config)).eval()
    with torch.no_grad():  # as if trained: no zero biases, no unit LayerNorm scales
        for param in model.parameters():
            param.add_(torch.randn(param.shape) * 0.05)
    ids = torch.randint(1, 100, (2, 12))
    mask = torch.ones(2, 12, dtype=torch.int64)
    mask[1, 8:] = 0
    ids[1, 8:] = 0
    types = torch.zeros(2, 12, dtype=torch.int64)
    types[:, 6:] = 1
    types[1, 8:] = 0
    names = ["input_ids", "attention_mask", "token_type_ids"]
    ref = export_torch("bert_hf_op17", model, (ids, mask, types), names,
                       ["sentence_embedding", "last_hidden_state"], 17)
    save_case("bert_hf_op17", dict(zip(names, (ids.numpy(), mask.numpy(), types.numpy()))), ref)


# ---------------------------------------------------------------------------------------------
# A decoder step with a KV cache


def llama_step():
    from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(70)
    config = LlamaConfig(vocab_size=96, hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
                         max_position_embeddings=64, rope_theta=10000.0,
                         tie_word_embeddings=False)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # as if trained: no unit RMSNorm scales
        for param in model.parameters():
            param.add_(torch.randn(param.shape) * 0.05)
    layers = config.num_hidden_layers

    class Step(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, position_ids, *past):
            cache = DynamicCache(config=self.m.config)
            for i in range(layers):
                cache.update(past[2 * i], past[2 * i + 1], i)
            out = self.m(input_ids=input_ids, attention_mask=attention_mask,
                         position_ids=position_ids, past_key_values=cache, use_cache=True)
            present = []
            for i in range(layers):
                present += [cache.layers[i].keys, cache.layers[i].values]
            return (out.logits, *present)

    names = ["input_ids", "attention_mask", "position_ids"]
    names += [f"past.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    outputs = ["logits"] + [f"present.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    dynamic = {"input_ids": {1: "q"}, "attention_mask": {1: "total"}, "position_ids": {1: "q"},
               "logits": {1: "q"}}
    dynamic.update({n: {2: "past"} for n in names[3:]})
    dynamic.update({n: {2: "total"} for n in outputs[1:]})
    step = Step(model).eval()
    heads, head = config.num_key_value_heads, config.hidden_size // config.num_attention_heads
    trace = (torch.zeros(1, 2, dtype=torch.long), torch.ones(1, 5, dtype=torch.long),
             torch.arange(3, 5)[None], *[torch.zeros(1, heads, 3, head)] * (2 * layers))
    path = os.path.join(OUT, "llama_step_op17.onnx")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(step, trace, path, input_names=names, output_names=outputs,
                          dynamic_axes=dynamic, opset_version=17, dynamo=False)
        prefix = torch.randint(0, 96, (1, 5))
        cache = model(input_ids=prefix, use_cache=True).past_key_values
        past = []
        for i in range(layers):
            past += [cache.layers[i].keys.clone(), cache.layers[i].values.clone()]
        ids = torch.randint(0, 96, (1, 3))
        args = (ids, torch.ones(1, 8, dtype=torch.long), torch.arange(5, 8)[None], *past)
        ref = {k: v.numpy() for k, v in zip(outputs, step(*args))}
    save_case("llama_step_op17", {k: v.numpy() for k, v in zip(names, args)}, ref)


# ---------------------------------------------------------------------------------------------
# scikit-learn


def digits_split():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x_train, x_test, y_train, y_test = train_test_split(
        digits.data.astype(np.float32), digits.target, test_size=50, random_state=0,
        stratify=digits.target)
    return x_train, x_test, y_train, y_test


def sklearn_logreg(name, options):
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType
    from sklearn.linear_model import LogisticRegression

    x_train, x_test, y_train, _ = digits_split()
    clf = LogisticRegression(max_iter=2000).fit(x_train, y_train)
    onx = convert_sklearn(clf, name=name, initial_types=[("X", FloatTensorType([None, 64]))],
                          options=options and {id(clf): options})
    onnx.save(onx, os.path.join(OUT, f"{name}.onnx"))
    label, probabilities = (o.name for o in onx.graph.output)
    save_case(name, {"X": x_test}, {label: clf.predict(x_test),
                                    probabilities: clf.predict_proba(x_test)})


def sklearn_pipeline():
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType
    from sklearn.linear_model import LinearRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import Normalizer, StandardScaler

    x_train, x_test, y_train, _ = digits_split()
    pipe = Pipeline([("scale", StandardScaler()), ("norm", Normalizer()),
                     ("regress", LinearRegression())]).fit(x_train, y_train.astype(np.float32))
    onx = convert_sklearn(pipe, name="sklearn_pipeline",
                          initial_types=[("X", FloatTensorType([None, 64]))])
    onnx.save(onx, os.path.join(OUT, "sklearn_pipeline.onnx"))
    save_case("sklearn_pipeline", {"X": x_test},
              {"variable": pipe.predict(x_test).reshape(-1, 1)})


FIXTURES = {
    "resnet_tiny_op11": lambda: resnet("resnet_tiny_op11", 11, folding=True),
    "resnet_tiny_op17": lambda: resnet("resnet_tiny_op17", 17, folding=False),
    "mobilenet_tiny_op11": lambda: mobilenet("mobilenet_tiny_op11", 11),
    "mobilenet_tiny_op17": lambda: mobilenet("mobilenet_tiny_op17", 17),
    "yolo_tiny_op17": yolo_tiny,
    "segment_tiny_op13": segment_tiny,
    "audio_lstm_op17": audio_lstm,
    "bert_hf_op17": bert_hf,
    "llama_step_op17": llama_step,
    "sklearn_logreg_default": lambda: sklearn_logreg("sklearn_logreg_default", None),
    "sklearn_logreg_nozipmap": lambda: sklearn_logreg("sklearn_logreg_nozipmap",
                                                      {"zipmap": False}),
    "sklearn_pipeline": sklearn_pipeline,
}


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.set_num_threads(1)
    names = sys.argv[1:] or list(FIXTURES)
    for name in names:
        if name not in FIXTURES:
            sys.exit(f"unknown fixture {name!r} (known: {', '.join(FIXTURES)})")
    start = time.time()
    for name in names:
        FIXTURES[name]()
    print(f"{len(names)} fixtures in {time.time() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
