#!/usr/bin/python3
"""Generate small ONNX test models with random weights (no downloads).

Uses only Debian's python3-onnx (1.12: opset 17, IR 8) and python3-numpy.

    /usr/bin/python3 make_models.py [--out models] [--seed 0] [--only mlp,cnn] [--opset 17]

Models (all float32, batch 1, static shapes):
  mlp          2-layer MLP: [1,784] -> Gemm 256 -> Relu -> Gemm 10
  cnn          (Conv3x3-BN-Relu-MaxPool2) x2 -> GlobalAveragePool -> Flatten -> Gemm
               input [1,3,32,32], output [1,10]
  resnet18     ResNet-18 topology (torchvision layout, BN not folded),
               input [1,3,224,224], output [1,1000]; ~45 MB of weights
  transformer  one post-LN transformer encoder block (BERT style):
               MatMul/Add/Reshape/Transpose/Softmax attention, LayerNormalization
               (opset 17 op), GELU as 0.5*x*(1+Erf(x/sqrt 2)); input [1,128,256]
  transformer_ln_decomposed
               same block with LayerNormalization decomposed into
               ReduceMean/Sub/Pow/Sqrt/Div/Mul/Add (what opset<17 exporters emit)
               and GELU in its tanh form, with Pow(x, 3) and Tanh (GPT-2 style)

  bert_base_block
               the transformer block at BERT-base size: hidden 768, 12 heads,
               FFN 3072, input [1,128,768]
  mobilenetv2  MobileNetV2 (inverted residuals, depthwise convs, ReLU6), [1,3,224,224]
  efficientnet_b0
               EfficientNet-B0 (MBConv with squeeze-excitation, swish), [1,3,224,224]
  unet         U-Net (ConvTranspose and bilinear Resize upsampling, skip Concat),
               input [1,3,128,128], output [1,2,128,128]
  crnn         CRNN for text lines (conv backbone, two bidirectional LSTMs, CTC-style
               LogSoftmax head), input [1,1,32,128], output [32,1,37]
  audio        1-D audio net (STFT as a strided Conv, power, mel bank MatMul, Log,
               Conv1d, GRU, per-frame Sigmoid), input [1,1,8000], output [61,1]
  bert_mask    BERT encoder, 2 layers, d=128: Gather embeddings, CumSum positions,
               attention mask through Equal/Expand/Where; inputs input_ids and
               attention_mask (int64 [1,64]), output [1,64,128]
  yolo         YOLO-style detector (SiLU conv backbone, nearest Resize neck, box
               decoding at two scales), input [1,3,256,256], output [1,960,25]

For each model NAME it writes NAME.onnx, NAME.input_K.pb for each input K
(random, ONNX TensorProto, same layout as the ONNX backend test data sets),
the same inputs as NAME.input_K.npy, and NAME.inputs, a line NAME=FILE per
input (as `tensortune run --input` and tools/ort take them).

--opset N (11..17, default 17) emits the same graphs for an older opset, as
older exporters do (onnx 1.12's version_converter cannot down-convert
BatchNormalization-15, so this is done at build time): below 17 the
"transformer" model also decomposes LayerNormalization, and ir_version is the
minimum for that opset (11 -> 6, 13 -> 7, 17 -> 8).  Op semantics used here are
identical across 11..17 (Softmax axis=-1 on the last axis; ReduceMean axes as an
attribute; Reshape shape as an input).
"""
import argparse
import os
import sys
import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17  # highest ai.onnx opset known to onnx 1.12; --opset overrides


class Builder:
    """Tiny graph builder: collects nodes and initializers, names things uniquely."""

    def __init__(self, rng):
        self.rng = rng
        self.nodes = []
        self.inits = []
        self.counter = {}

    def name(self, prefix):
        n = self.counter.get(prefix, 0)
        self.counter[prefix] = n + 1
        return f"{prefix}_{n}"

    def const(self, prefix, arr):
        nm = self.name(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), nm))
        return nm

    def rand(self, prefix, shape, scale):
        return self.const(prefix, (self.rng.standard_normal(shape) * scale).astype(np.float32))

    def op(self, op_type, inputs, n_out=1, **attrs):
        base = self.name(op_type.lower())
        outs = [f"{base}_out{i}" if n_out > 1 else f"{base}_out" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=base, **attrs))
        return outs if n_out > 1 else outs[0]

    # layers -------------------------------------------------------------
    def conv(self, x, cin, cout, k, stride=1, pad=0, bias=True):
        w = self.rand("conv_w", (cout, cin, k, k), np.sqrt(2.0 / (cin * k * k)))
        ins = [x, w]
        if bias:
            ins.append(self.rand("conv_b", (cout,), 0.01))
        return self.op("Conv", ins, kernel_shape=[k, k], strides=[stride, stride],
                       pads=[pad, pad, pad, pad], dilations=[1, 1], group=1)

    def bn(self, x, c):
        r = self.rng
        scale = self.const("bn_scale", (1.0 + 0.1 * r.standard_normal(c)).astype(np.float32))
        bias = self.const("bn_bias", (0.1 * r.standard_normal(c)).astype(np.float32))
        mean = self.const("bn_mean", (0.1 * r.standard_normal(c)).astype(np.float32))
        var = self.const("bn_var", (1.0 + 0.1 * np.abs(r.standard_normal(c))).astype(np.float32))
        return self.op("BatchNormalization", [x, scale, bias, mean, var], epsilon=1e-5, momentum=0.9)

    def conv_bn(self, x, cin, cout, k, stride=1, groups=1):
        """A bias-free k x k convolution padded to keep its extent (over
        `groups`), then batch norm: the unit of the mobile networks."""
        w = self.rand("conv_w", (cout, cin // groups, k, k), np.sqrt(2.0 / (cin // groups * k * k)))
        x = self.op("Conv", [x, w], kernel_shape=[k, k], strides=[stride, stride],
                    pads=[k // 2] * 4, group=groups)
        return self.bn(x, cout)

    def classifier(self, x, cin, name, title, size, classes=1000):
        """Global average pooling and a fully connected layer to `classes`: the model."""
        x = self.op("Flatten", [self.op("GlobalAveragePool", [x])], axis=1)
        out = self.gemm(x, cin, classes)
        return self.model(name, [vi("input", [1, 3, size, size])], [vi(out, [1, classes])],
                          f"{title} topology, random weights"), (1, 3, size, size)

    def gemm(self, x, cin, cout):
        # PyTorch-export layout: weight [out, in], transB=1
        w = self.rand("fc_w", (cout, cin), np.sqrt(1.0 / cin))
        b = self.rand("fc_b", (cout,), 0.01)
        return self.op("Gemm", [x, w, b], alpha=1.0, beta=1.0, transB=1)

    def linear3d(self, x, cin, cout):
        # transformer style: MatMul with weight [in, out] then Add bias
        w = self.rand("lin_w", (cin, cout), np.sqrt(1.0 / cin))
        b = self.rand("lin_b", (cout,), 0.01)
        return self.op("Add", [self.op("MatMul", [x, w]), b])

    def model(self, name, inputs, outputs, doc):
        graph = helper.make_graph(self.nodes, name, inputs, outputs, initializer=self.inits)
        m = helper.make_model(graph, producer_name="make_models",
                              opset_imports=[helper.make_opsetid("", OPSET)], doc_string=doc)
        m.ir_version = helper.find_min_ir_version_for(list(m.opset_import))
        return m


def vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def make_mlp(rng):
    b = Builder(rng)
    h = b.op("Relu", [b.gemm("input", 784, 256)])
    out = b.gemm(h, 256, 10)
    return b.model("mlp", [vi("input", [1, 784])], [vi(out, [1, 10])],
                   "2-layer MLP 784-256-10"), (1, 784)


def make_cnn(rng):
    b = Builder(rng)
    x, c = "input", 3
    for cout in (16, 32):
        x = b.conv(x, c, cout, 3, pad=1)
        x = b.op("Relu", [b.bn(x, cout)])
        x = b.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
        c = cout
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x])], axis=1)
    out = b.gemm(x, c, 10)
    return b.model("cnn", [vi("input", [1, 3, 32, 32])], [vi(out, [1, 10])],
                   "small CNN: (conv-bn-relu-maxpool)x2, GAP, gemm"), (1, 3, 32, 32)


def make_resnet18(rng):
    b = Builder(rng)
    x = b.conv("input", 3, 64, 7, stride=2, pad=3, bias=False)
    x = b.op("Relu", [b.bn(x, 64)])
    x = b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for stage, cout in enumerate((64, 128, 256, 512)):
        for blk in range(2):
            stride = 2 if (stage > 0 and blk == 0) else 1
            y = b.conv(x, cin, cout, 3, stride=stride, pad=1, bias=False)
            y = b.op("Relu", [b.bn(y, cout)])
            y = b.conv(y, cout, cout, 3, stride=1, pad=1, bias=False)
            y = b.bn(y, cout)
            if stride != 1 or cin != cout:
                sc = b.bn(b.conv(x, cin, cout, 1, stride=stride, pad=0, bias=False), cout)
            else:
                sc = x
            x = b.op("Relu", [b.op("Add", [y, sc])])
            cin = cout
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x])], axis=1)
    out = b.gemm(x, 512, 1000)
    return b.model("resnet18", [vi("input", [1, 3, 224, 224])], [vi(out, [1, 1000])],
                   "ResNet-18 topology, random weights"), (1, 3, 224, 224)


def make_mobilenetv2(rng, width=1.0, size=224):
    """MobileNetV2 as torchvision exports it: inverted residual blocks (1x1
    expand, 3x3 depthwise, 1x1 project) with batch norm and ReLU6 (Clip)."""
    b = Builder(rng)

    def cbr(x, cin, cout, k, stride=1, groups=1, relu=True):
        x = b.conv_bn(x, cin, cout, k, stride, groups)
        if relu:
            x = b.op("Clip", [x, b.const("relu6_lo", np.float32(0)), b.const("relu6_hi", np.float32(6))])
        return x

    def ch(c):
        return max(8, int(c * width + 4) // 8 * 8)

    x, cin = cbr("input", 3, ch(32), 3, stride=2), ch(32)
    for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                       (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(n):
            stride, cout, hidden = s if i == 0 else 1, ch(c), cin * t
            y = cbr(x, cin, hidden, 1) if t != 1 else x
            y = cbr(y, hidden, hidden, 3, stride=stride, groups=hidden)
            y = cbr(y, hidden, cout, 1, relu=False)
            x = b.op("Add", [x, y]) if stride == 1 and cin == cout else y
            cin = cout
    return b.classifier(cbr(x, cin, 1280, 1), 1280, "mobilenetv2", "MobileNetV2", size)


def make_efficientnet_b0(rng, size=224):
    """EfficientNet-B0 as torchvision exports it: MBConv blocks (1x1 expand,
    k x k depthwise, squeeze-excitation, 1x1 project) with batch norm and
    swish written as x * Sigmoid(x)."""
    b = Builder(rng)

    def swish(x):
        return b.op("Mul", [x, b.op("Sigmoid", [x])])

    def cbs(x, cin, cout, k, stride=1, groups=1, act=True):
        x = b.conv_bn(x, cin, cout, k, stride, groups)
        return swish(x) if act else x

    def squeeze_excite(x, c, squeezed):
        s = b.op("GlobalAveragePool", [x])
        s = swish(b.conv(s, c, squeezed, 1))
        s = b.op("Sigmoid", [b.conv(s, squeezed, c, 1)])
        return b.op("Mul", [x, s])

    x, cin = cbs("input", 3, 32, 3, stride=2), 32
    for t, k, s, c, n in ((1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3),
                          (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1)):
        for i in range(n):
            stride, hidden = s if i == 0 else 1, cin * t
            y = cbs(x, cin, hidden, 1) if t != 1 else x
            y = cbs(y, hidden, hidden, k, stride=stride, groups=hidden)
            y = squeeze_excite(y, hidden, max(1, cin // 4))
            y = cbs(y, hidden, c, 1, act=False)
            x = b.op("Add", [x, y]) if stride == 1 and cin == c else y
            cin = c
    return b.classifier(cbs(x, cin, 1280, 1), 1280, "efficientnet_b0", "EfficientNet-B0", size)


def make_unet(rng, size=128, base=16):
    """A U-Net for segmentation: a conv encoder with max pooling, a decoder
    that upsamples by ConvTranspose (two levels) and Resize (one level,
    bilinear), skip connections joined by Concat, a per-pixel sigmoid."""
    b = Builder(rng)

    def double_conv(x, cin, cout):
        for c in (cin, cout):
            x = b.op("Relu", [b.bn(b.conv(x, c, cout, 3, pad=1, bias=False), cout)])
        return x

    skips, x, cin = [], "input", 3
    for level in range(3):
        c = base << level
        x = double_conv(x, cin, c)
        skips.append((x, c))
        x = b.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
        cin = c
    x = double_conv(x, cin, base << 3)
    cin = base << 3
    for level, (skip, c) in reversed(list(enumerate(skips))):
        if level == 0:
            up = b.op("Resize", [x, "", b.const("up_scales", np.float32([1, 1, 2, 2]))], mode="linear")
            up = b.conv(up, cin, c, 1)
        else:
            w = b.rand("up_w", (cin, c, 2, 2), np.sqrt(1.0 / (cin * 4)))
            up = b.op("ConvTranspose", [x, w, b.rand("up_b", (c,), 0.01)], kernel_shape=[2, 2], strides=[2, 2])
        x = double_conv(b.op("Concat", [skip, up], axis=1), 2 * c, c)
        cin = c
    out = b.op("Sigmoid", [b.conv(x, cin, 2, 1)])
    return b.model("unet", [vi("input", [1, 3, size, size])], [vi(out, [1, 2, size, size])],
                   "U-Net topology, random weights"), (1, 3, size, size)


def layer_norm(b, x, d, decomposed):
    gamma = b.const("ln_gamma", (1.0 + 0.1 * b.rng.standard_normal(d)).astype(np.float32))
    beta = b.const("ln_beta", (0.1 * b.rng.standard_normal(d)).astype(np.float32))
    if not decomposed and OPSET >= 17:
        return b.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-5)
    mean = b.op("ReduceMean", [x], axes=[-1], keepdims=1)  # opset<18: axes is an attribute
    xc = b.op("Sub", [x, mean])
    var = b.op("ReduceMean", [b.op("Pow", [xc, b.const("two", np.float32(2.0))])], axes=[-1], keepdims=1)
    std = b.op("Sqrt", [b.op("Add", [var, b.const("eps", np.float32(1e-5))])])
    return b.op("Add", [b.op("Mul", [b.op("Div", [xc, std]), gamma]), beta])


def gelu_erf(b, x):
    inv_sqrt2 = b.const("inv_sqrt2", np.float32(1.0 / np.sqrt(2.0)))
    e = b.op("Erf", [b.op("Mul", [x, inv_sqrt2])])
    one_plus = b.op("Add", [e, b.const("one", np.float32(1.0))])
    return b.op("Mul", [b.op("Mul", [x, one_plus]), b.const("half", np.float32(0.5))])


def gelu_tanh(b, x):
    """GELU's tanh form, 0.5*x*(1+Tanh(sqrt(2/pi)*(x+0.044715*Pow(x,3)))), as GPT-2-style exporters write it."""
    cube = b.op("Pow", [x, b.const("three", np.float32(3.0))])
    inner = b.op("Add", [x, b.op("Mul", [cube, b.const("gelu_c", np.float32(0.044715))])])
    t = b.op("Tanh", [b.op("Mul", [inner, b.const("sqrt_2_pi", np.float32(np.sqrt(2.0 / np.pi)))])])
    one_plus = b.op("Add", [t, b.const("one", np.float32(1.0))])
    return b.op("Mul", [b.op("Mul", [x, one_plus]), b.const("half", np.float32(0.5))])


def make_transformer(rng, decomposed=False, seq=128, d=256, heads=4, ffn=1024):
    b = Builder(rng)
    dh = d // heads
    x = "input"
    shape_heads = b.const("shape_heads", np.array([1, seq, heads, dh], dtype=np.int64))
    shape_merge = b.const("shape_merge", np.array([1, seq, d], dtype=np.int64))

    def split_heads(t, perm):
        return b.op("Transpose", [b.op("Reshape", [t, shape_heads])], perm=perm)

    q = split_heads(b.linear3d(x, d, d), [0, 2, 1, 3])   # [1,h,s,dh]
    k = split_heads(b.linear3d(x, d, d), [0, 2, 3, 1])   # [1,h,dh,s]
    v = split_heads(b.linear3d(x, d, d), [0, 2, 1, 3])   # [1,h,s,dh]
    scores = b.op("Div", [b.op("MatMul", [q, k]), b.const("sqrt_dh", np.float32(np.sqrt(dh)))])
    probs = b.op("Softmax", [scores], axis=-1)
    ctx = b.op("Transpose", [b.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])  # [1,s,h,dh]
    ctx = b.op("Reshape", [ctx, shape_merge])
    attn = b.linear3d(ctx, d, d)
    h1 = layer_norm(b, b.op("Add", [attn, x]), d, decomposed)
    f = (gelu_tanh if decomposed else gelu_erf)(b, b.linear3d(h1, d, ffn))
    f = b.linear3d(f, ffn, d)
    out = layer_norm(b, b.op("Add", [f, h1]), d, decomposed)
    name = "transformer_ln_decomposed" if decomposed else ("transformer" if d == 256 else "bert_base_block")
    return b.model(name, [vi("input", [1, seq, d])], [vi(out, [1, seq, d])],
                   f"post-LN encoder block seq={seq} d={d} heads={heads} ffn={ffn}"), (1, seq, d)


def make_crnn(rng, height=32, width=128, classes=37, hidden=96):
    """A CRNN for text lines: a VGG-style conv backbone pooling the height
    away, two bidirectional LSTMs over the columns, a per-column class
    projection with LogSoftmax (a CTC head). Output [columns, 1, classes]."""
    b = Builder(rng)
    x, cin = "input", 1
    for cout, pool in ((32, (2, 2)), (64, (2, 2)), (128, (2, 1)), (128, (2, 1))):
        x = b.op("Relu", [b.bn(b.conv(x, cin, cout, 3, pad=1, bias=False), cout)])
        x = b.op("MaxPool", [x], kernel_shape=list(pool), strides=list(pool))
        cin = cout
    w = b.rand("conv_w", (256, cin, 2, 1), np.sqrt(2.0 / (cin * 2)))
    x = b.op("Relu", [b.op("Conv", [x, w, b.rand("conv_b", (256,), 0.01)], kernel_shape=[2, 1])])
    cols = width // 4
    x = b.op("Reshape", [x, b.const("seq_shape", np.int64([1, 256, cols]))])
    x, cin = b.op("Transpose", [x], perm=[2, 0, 1]), 256  # [columns, batch, features]
    for _ in range(2):
        scale = np.sqrt(1.0 / hidden)
        y = b.op("LSTM", [x, b.rand("lstm_w", (2, 4 * hidden, cin), scale),
                          b.rand("lstm_r", (2, 4 * hidden, hidden), scale),
                          b.rand("lstm_b", (2, 8 * hidden), 0.1)],
                 n_out=1, direction="bidirectional", hidden_size=hidden)
        y = b.op("Transpose", [y], perm=[0, 2, 1, 3])  # [columns, batch, 2, hidden]
        x, cin = b.op("Reshape", [y, b.const("bi_shape", np.int64([cols, 1, 2 * hidden]))]), 2 * hidden
    logits = b.linear3d(x, cin, classes)
    out = b.op("LogSoftmax", [logits], axis=-1)
    return b.model("crnn", [vi("input", [1, 1, height, width])], [vi(out, [cols, 1, classes])],
                   "CRNN topology, random weights"), (1, 1, height, width)


def make_audio(rng, samples=8000, n_fft=256, hop=128, mels=40, hidden=64):
    """A 1-D audio net (voice activity, keywords): an STFT as a strided Conv
    over the waveform (Hann-windowed DFT bases), the power spectrum, a mel
    filter bank as a MatMul, log, a 1-D convolution, a GRU over the frames
    and a per-frame sigmoid. Output [frames, 1]."""
    b = Builder(rng)
    bins, frames = n_fft // 2 + 1, (samples - n_fft) // hop + 1
    t = np.arange(n_fft)
    hann = 0.5 - 0.5 * np.cos(2 * np.pi * t / n_fft)
    k = np.arange(bins)[:, None]
    basis = np.concatenate([np.cos(2 * np.pi * k * t / n_fft) * hann, -np.sin(2 * np.pi * k * t / n_fft) * hann])
    spec = b.op("Conv", ["input", b.const("stft_basis", basis[:, None, :].astype(np.float32))],
                kernel_shape=[n_fft], strides=[hop])  # [1, 2 * bins, frames]

    def part(begin, end):
        return b.op("Slice", [spec, b.const("begin", np.int64([begin])), b.const("end", np.int64([end])),
                              b.const("axis", np.int64([1]))])

    re, im = part(0, bins), part(bins, 2 * bins)
    power = b.op("Add", [b.op("Mul", [re, re]), b.op("Mul", [im, im])])
    # Triangular filters evenly spaced on the mel scale.
    mel = lambda f: 2595 * np.log10(1 + f / 700.0)  # noqa: E731
    edges = 700 * (10 ** (np.linspace(mel(0), mel(8000), mels + 2) / 2595) - 1)
    freqs = np.linspace(0, 8000, bins)
    bank = np.zeros((bins, mels), np.float32)
    for m in range(mels):
        lo, mid, hi = edges[m], edges[m + 1], edges[m + 2]
        bank[:, m] = np.clip(np.minimum((freqs - lo) / (mid - lo), (hi - freqs) / (hi - mid)), 0, None)
    x = b.op("MatMul", [b.op("Transpose", [power], perm=[0, 2, 1]), b.const("mel_bank", bank)])
    x = b.op("Log", [b.op("Add", [x, b.const("log_eps", np.float32(1e-6))])])  # [1, frames, mels]
    w = b.rand("conv1d_w", (hidden, mels, 3), np.sqrt(2.0 / (mels * 3)))
    x = b.op("Relu", [b.op("Conv", [b.op("Transpose", [x], perm=[0, 2, 1]), w, b.rand("conv1d_b", (hidden,), 0.01)],
                           kernel_shape=[3], pads=[1, 1])])  # [1, hidden, frames]
    x = b.op("Transpose", [x], perm=[2, 0, 1])  # [frames, 1, hidden]
    scale = np.sqrt(1.0 / hidden)
    y = b.op("GRU", [x, b.rand("gru_w", (1, 3 * hidden, hidden), scale), b.rand("gru_r", (1, 3 * hidden, hidden), scale),
                     b.rand("gru_b", (1, 6 * hidden), 0.1)], hidden_size=hidden, linear_before_reset=1)
    y = b.op("Reshape", [y, b.const("frames_shape", np.int64([frames, hidden]))])
    out = b.op("Sigmoid", [b.gemm(y, hidden, 1)])
    return b.model("audio", [vi("input", [1, 1, samples])], [vi(out, [frames, 1])],
                   "1-D audio net (STFT conv, mel bank, GRU), random weights"), (1, 1, samples)


def make_bert_mask(rng, seq=64, vocab=1000, d=128, heads=4, ffn=512, layers=2):
    """A BERT encoder as exporters write it, with an attention mask input:
    token, position (RoBERTa style, from a CumSum of the mask) and type
    embeddings gathered, the padding masked from the scores through
    Equal, Expand and Where, two post-LN layers. Inputs input_ids and
    attention_mask (int64 [1, seq]); output the last hidden state."""
    b = Builder(rng)
    dh = d // heads
    ids, mask = "input_ids", "attention_mask"
    emb = b.op("Gather", [b.rand("word_emb", (vocab, d), 0.5), ids])
    positions = b.op("Add", [b.op("Mul", [b.op("CumSum", [mask, b.const("axis", np.int64(1))]), mask]),
                             b.const("padding_idx", np.int64(1))])
    emb = b.op("Add", [emb, b.op("Gather", [b.rand("pos_emb", (seq + 2, d), 0.5), positions])])
    types = b.op("ConstantOfShape", [b.op("Shape", [ids])], value=numpy_helper.from_array(np.int64([0])))
    emb = b.op("Add", [emb, b.op("Gather", [b.rand("type_emb", (2, d), 0.5), types])])
    x = layer_norm(b, emb, d, False)
    padded = b.op("Reshape", [b.op("Equal", [mask, b.const("zero", np.int64(0))]),
                              b.const("mask_shape", np.int64([1, 1, 1, seq]))])
    padded = b.op("Expand", [padded, b.const("scores_shape", np.int64([1, heads, seq, seq]))])
    bias = b.op("Where", [padded, b.const("neg", np.float32(-1e4)), b.const("nothing", np.float32(0))])
    shape_heads = b.const("shape_heads", np.int64([1, seq, heads, dh]))
    shape_merge = b.const("shape_merge", np.int64([1, seq, d]))

    def split_heads(t, perm):
        return b.op("Transpose", [b.op("Reshape", [t, shape_heads])], perm=perm)

    for _ in range(layers):
        q = split_heads(b.linear3d(x, d, d), [0, 2, 1, 3])
        k = split_heads(b.linear3d(x, d, d), [0, 2, 3, 1])
        v = split_heads(b.linear3d(x, d, d), [0, 2, 1, 3])
        scores = b.op("Div", [b.op("MatMul", [q, k]), b.const("sqrt_dh", np.float32(np.sqrt(dh)))])
        probs = b.op("Softmax", [b.op("Add", [scores, bias])], axis=-1)
        ctx = b.op("Reshape", [b.op("Transpose", [b.op("MatMul", [probs, v])], perm=[0, 2, 1, 3]), shape_merge])
        x = layer_norm(b, b.op("Add", [b.linear3d(ctx, d, d), x]), d, False)
        f = b.linear3d(gelu_erf(b, b.linear3d(x, d, ffn)), ffn, d)
        x = layer_norm(b, b.op("Add", [f, x]), d, False)
    model = b.model("bert_mask", [vi(ids, [1, seq], TensorProto.INT64), vi(mask, [1, seq], TensorProto.INT64)],
                    [vi(x, [1, seq, d])], f"BERT encoder with an attention mask, {layers} layers, d={d}")
    valid = seq * 3 // 4
    return model, {ids: rng.integers(2, vocab, (1, seq)).astype(np.int64),
                   mask: np.int64([[1] * valid + [0] * (seq - valid)])}


def make_yolo(rng, size=256, classes=20):
    """A YOLO-style detector: a strided conv backbone with SiLU, a neck that
    upsamples (nearest Resize) and joins the finer map, and a head at two
    scales decoding boxes as YOLOv5 does (sigmoid, grid offsets, anchors).
    Output [1, boxes, 5 + classes]."""
    b = Builder(rng)

    def cbs(x, cin, cout, k, stride=1):
        x = b.conv_bn(x, cin, cout, k, stride)
        return b.op("Mul", [x, b.op("Sigmoid", [x])])

    x, feats = "input", []
    for cin, cout in ((3, 16), (16, 32), (32, 64), (64, 128), (128, 256)):
        x = cbs(cbs(x, cin, cout, 3, stride=2), cout, cout, 3)
        feats.append(x)
    p4, p5 = feats[3], cbs(feats[4], 256, 128, 1)
    up = b.op("Resize", [p5, "", b.const("up_scales", np.float32([1, 1, 2, 2]))], mode="nearest")
    p4 = cbs(b.op("Concat", [up, p4], axis=1), 256, 128, 3)
    per = 5 + classes
    anchors = {16: [(10, 13), (16, 30), (33, 23)], 32: [(30, 61), (62, 45), (59, 119)]}
    boxes = []
    for feat, ch, stride in ((p4, 128, 16), (p5, 128, 32)):
        n = size // stride
        y = b.conv(feat, ch, 3 * per, 1, bias=True)
        y = b.op("Reshape", [y, b.const("head_shape", np.int64([1, 3, per, n, n]))])
        y = b.op("Sigmoid", [b.op("Transpose", [y], perm=[0, 1, 3, 4, 2])])  # [1, 3, n, n, per]

        def cut(begin, end):
            return b.op("Slice", [y, b.const("begin", np.int64([begin])), b.const("end", np.int64([end])),
                                  b.const("axis", np.int64([4]))])

        gy, gx = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
        grid = np.stack([gx, gy], -1).reshape(1, 1, n, n, 2).astype(np.float32) - 0.5
        anchor_grid = np.float32(anchors[stride]).reshape(1, 3, 1, 1, 2)
        two = b.const("two", np.float32(2))
        xy = b.op("Mul", [b.op("Add", [b.op("Mul", [cut(0, 2), two]), b.const("grid", grid)]),
                          b.const("stride", np.float32(stride))])
        wh = b.op("Mul", [b.op("Pow", [b.op("Mul", [cut(2, 4), two]), two]), b.const("anchor_grid", anchor_grid)])
        y = b.op("Concat", [xy, wh, cut(4, per)], axis=4)
        boxes.append(b.op("Reshape", [y, b.const("boxes_shape", np.int64([1, 3 * n * n, per]))]))
    out = b.op("Concat", boxes, axis=1)
    count = 3 * ((size // 16) ** 2 + (size // 32) ** 2)
    return b.model("yolo", [vi("input", [1, 3, size, size])], [vi(out, [1, count, per])],
                   "YOLO-style detector, random weights"), (1, 3, size, size)


MODELS = {
    "mlp": make_mlp,
    "cnn": make_cnn,
    "resnet18": make_resnet18,
    "transformer": lambda rng: make_transformer(rng, decomposed=False),
    "transformer_ln_decomposed": lambda rng: make_transformer(rng, decomposed=True),
    # BERT-base-sized block (benchmarks only: 28 MB of weights).
    "bert_base_block": lambda rng: make_transformer(rng, d=768, heads=12, ffn=3072),
    "mobilenetv2": make_mobilenetv2,
    "efficientnet_b0": make_efficientnet_b0,
    "unet": make_unet,
    "crnn": make_crnn,
    "audio": make_audio,
    "bert_mask": make_bert_mask,
    "yolo": make_yolo,
}


FIRST = ("mlp", "cnn", "resnet18", "transformer", "transformer_ln_decomposed", "bert_base_block")
OPT_IN = ("bert_base_block", "mobilenetv2", "efficientnet_b0", "unet", "crnn", "audio", "bert_mask", "yolo")  # made only when asked for (--only)


def count_macs(model):
    """Multiply-accumulates of Conv/Gemm/MatMul, from inferred static shapes."""
    m = onnx.shape_inference.infer_shapes(model)
    g = m.graph
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(g.input) + list(g.value_info) + list(g.output)}
    shapes.update({t.name: list(t.dims) for t in g.initializer})
    macs = 0
    for nd in g.node:
        out = shapes.get(nd.output[0])
        if nd.op_type == "Conv":
            w = shapes[nd.input[1]]
            macs += int(np.prod(out)) * int(np.prod(w[1:]))
        elif nd.op_type == "Gemm":
            w = shapes[nd.input[1]]
            macs += int(np.prod(out)) * w[1 if any(a.name == "transB" and a.i for a in nd.attribute) else 0]
        elif nd.op_type == "MatMul":
            macs += int(np.prod(out)) * shapes[nd.input[0]][-1]
    return macs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="models", help="output folder (default: models)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="", help="comma-separated subset of: " + ",".join(MODELS))
    ap.add_argument("--opset", type=int, default=OPSET, choices=range(11, 18), metavar="11..17")
    args = ap.parse_args()
    globals()["OPSET"] = args.opset
    names = [n for n in args.only.split(",") if n] or [n for n in MODELS if n not in OPT_IN]
    for n in names:
        if n not in MODELS:
            sys.exit(f"unknown model {n!r}; choose from {', '.join(MODELS)}")
    os.makedirs(args.out, exist_ok=True)
    for n in names:
        # The first models' seeds are their places among themselves; later
        # ones' come from their names, so adding one changes no other's.
        seed = sorted(FIRST).index(n) if n in FIRST else zlib.crc32(n.encode())
        rng = np.random.default_rng([args.seed, seed])
        model, in_shape = MODELS[n](rng)
        onnx.checker.check_model(model, full_check=True)  # also runs strict shape inference
        path = os.path.join(args.out, n + ".onnx")
        onnx.save(model, path)
        # A model gives its input's shape (one float input named "input",
        # drawn here), or its inputs by name.
        inputs = in_shape if isinstance(in_shape, dict) else {
            "input": rng.standard_normal(in_shape).astype(np.float32)}
        listed = []
        for k, (name, value) in enumerate(inputs.items()):
            onnx.save_tensor(numpy_helper.from_array(value, name), os.path.join(args.out, f"{n}.input_{k}.pb"))
            np.save(os.path.join(args.out, f"{n}.input_{k}.npy"), value)
            listed.append(f"{name}={n}.input_{k}.npy")
        with open(os.path.join(args.out, n + ".inputs"), "w") as f:
            f.write("\n".join(listed) + "\n")
        nparams = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
        ops = sorted({nd.op_type for nd in model.graph.node})
        print(f"{path}: {os.path.getsize(path) / 1e6:.2f} MB, {len(model.graph.node)} nodes, "
              f"{nparams} params, {count_macs(model) / 1e6:.1f} MMAC, ops={','.join(ops)}")


if __name__ == "__main__":
    main()
