//! The op table: every fact about an elementwise op or a reduction, in one place.
//!
//! Each stage derives what it needs from here instead of matching on ops itself: the DSL and
//! the HLIR take names and arities, the LLIR its FLOP counts, the dumps and the e-graph
//! language their names (`Display`/`FromStr`), the CPU runtime [`ElemOp::eval_f32`], the f64
//! reference interpreter [`ElemOp::eval_f64`], the CUDA runtime [`ElemOp::cuda_fn`], and
//! fusion the epilogue an activation can become ([`UnaryOp::epilogue_activation`]). Adding an
//! elementwise op is one variant and one arm per `match` below; the compiler lists every fact
//! left out. This is how Luminal's `op.rs` and tinygrad's `Ops`/`GroupOp` keep an op's facts
//! together (candle does the same with its `UnaryOpT` trait).
//!
//! Every row states its contract on NaN, signed zero and infinities; the f32 and f64 forms
//! and the CUDA source sit side by side so they keep to it. These ops compute in f32;
//! comparisons return 1.0 or 0.0. The exact integer ops on i32/i64 tensors (bitwise logic and
//! shifts) have a table of their own, [`IntOp`], with the same facts per op.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::dtype::DType;

/// `sqrt(2 / pi)`, the constant of the tanh form of GELU.
const SQRT_2_OVER_PI_F64: f64 = 0.797_884_560_802_865_4;

/// Unary elementwise ops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UnaryOp {
    /// `-x` (flips the sign of 0 and NaN too).
    Neg,
    /// `e^x`: exp(-inf) = 0, exp(+inf) = +inf.
    Exp,
    /// Natural log: log(0) = -inf, log(x < 0) = NaN.
    Log,
    /// Square root: sqrt(-0) = -0, sqrt(x < 0) = NaN.
    Sqrt,
    /// `1 / x`: recip(+0) = +inf, recip(-0) = -inf.
    Recip,
    /// Hyperbolic tangent: +-1 at +-inf.
    Tanh,
    /// The error function: +-1 at +-inf (lumen's [`erf_f32`] on the CPU, libm's `erf` in the
    /// f64 reference, CUDA's `erff`).
    Erf,
    /// `x < 0 ? 0 : x`: NaN stays NaN (a `max` would hide a poisoned read), -0 stays -0.
    Relu,
    /// GELU, tanh form (Hendrycks & Gimpel; PyTorch's `approximate="tanh"`), see [`gelu_f32`]:
    /// gelu(+inf) = +inf, gelu(-inf) = -0.
    Gelu,
    /// The identity, written to a fresh row-major buffer: how a view a kernel cannot read
    /// through becomes contiguous (Luminal's `Contiguous`). Every value, NaN included, is
    /// copied bit for bit.
    Contiguous,
    /// The logistic sigmoid `1 / (1 + e^-x)`, see [`sigmoid_f32`]: 1 at +inf, 0 at -inf.
    Sigmoid,
    /// SiLU (swish) `x * sigmoid(x)`, see [`silu_f32`]: silu(+inf) = +inf, silu(-inf) = -0
    /// (the limit; the formula alone gives `-inf * 0 = NaN`).
    Silu,
    /// Hard swish `x * min(max(x + 3, 0), 6) / 6` (MobileNetV3; ONNX `HardSwish`, PyTorch's
    /// `Hardswish`): `x` from 3 up, `x * 0` (so -0 for negative `x`) from -3 down, -0 at -inf.
    HardSwish,
    /// `min(max(x, 0), 6)` (MobileNetV2's ReLU6): NaN stays NaN, -0 stays -0.
    Relu6,
    /// Sine (radians): NaN at +-inf, sin(-0) = -0.
    Sin,
    /// Cosine (radians): NaN at +-inf, cos(+-0) = 1.
    Cos,
    /// Tangent (radians): NaN at +-inf, tan(-0) = -0.
    Tan,
    /// Arcsine in radians, `[-pi/2, pi/2]`: NaN outside `[-1, 1]`, asin(-0) = -0.
    Asin,
    /// Arccosine in radians, `[0, pi]`: NaN outside `[-1, 1]`.
    Acos,
    /// Arctangent in radians: +-pi/2 at +-inf, atan(-0) = -0.
    Atan,
    /// Hyperbolic sine: +-inf at +-inf (and past |x| ~ 89.4 in f32), sinh(-0) = -0.
    Sinh,
    /// Hyperbolic cosine: +inf at +-inf (and past |x| ~ 89.4 in f32), cosh(0) = 1.
    Cosh,
    /// Inverse hyperbolic sine: +-inf at +-inf, asinh(-0) = -0.
    Asinh,
    /// Inverse hyperbolic cosine: NaN below 1, acosh(1) = 0, +inf at +inf.
    Acosh,
    /// Inverse hyperbolic tangent: NaN outside `[-1, 1]`, +-inf at +-1, atanh(-0) = -0.
    Atanh,
}

/// Binary elementwise ops (operands broadcast NumPy-style in the HLIR).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BinaryOp {
    /// `a + b`, IEEE 754.
    Add,
    /// `a - b`, IEEE 754.
    Sub,
    /// `a * b`, IEEE 754.
    Mul,
    /// `a / b`, IEEE 754 (x / 0 = +-inf, 0 / 0 = NaN).
    Div,
    /// The larger of `a` and `b`; NaN if either is NaN (NumPy's `maximum`, not `fmax`);
    /// `maximum(-0, +0)` is the first operand.
    Maximum,
    /// `a < b ? 1 : 0` (0 when either is NaN).
    LessThan,
    /// `a == b ? 1 : 0` (0 when either is NaN; `-0 == +0` is 1).
    Equal,
    /// `a` to the power `b`, C's `powf` (ONNX's `Pow`, NumPy's `power` for floats): NaN for a
    /// negative base with a non-integer exponent, `pow(x, 0) = 1` even for NaN `x`.
    Pow,
}

/// An elementwise op of any arity: what an LLIR `map` node computes per element.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ElemOp {
    /// One operand.
    Unary(UnaryOp),
    /// Two operands.
    Binary(BinaryOp),
    /// `select(c, a, b) = c != 0 ? a : b` (a NaN condition selects `a`, since NaN != 0).
    Select,
}

impl UnaryOp {
    /// Every unary op, in declaration order.
    pub const ALL: [UnaryOp; 25] = [
        UnaryOp::Neg,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Sqrt,
        UnaryOp::Recip,
        UnaryOp::Tanh,
        UnaryOp::Erf,
        UnaryOp::Relu,
        UnaryOp::Gelu,
        UnaryOp::Contiguous,
        UnaryOp::Sigmoid,
        UnaryOp::Silu,
        UnaryOp::HardSwish,
        UnaryOp::Relu6,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Tan,
        UnaryOp::Asin,
        UnaryOp::Acos,
        UnaryOp::Atan,
        UnaryOp::Sinh,
        UnaryOp::Cosh,
        UnaryOp::Asinh,
        UnaryOp::Acosh,
        UnaryOp::Atanh,
    ];

    /// The activation a cuBLASLt epilogue can apply for this op (`Relu`, `Gelu`), if any.
    /// Only the tanh-form GELU is cuBLASLt's GELU; erf-GELU is a composite and never fuses.
    pub fn epilogue_activation(self) -> Option<UnaryOp> {
        matches!(self, UnaryOp::Relu | UnaryOp::Gelu).then_some(self)
    }

    /// Whether a convolution's epilogue may apply this op to its output (lumen's own conv
    /// kernels take any activation of the table, as ONNX Runtime's `FusedConv` does): relu,
    /// relu6, sigmoid, silu, hard swish, tanh and both GELUs' tanh form. Not the other math
    /// (exp, log, ...) nor `contiguous`: fusing them saves a launch but no model asks for it.
    pub fn is_activation(self) -> bool {
        matches!(
            self,
            UnaryOp::Relu
                | UnaryOp::Relu6
                | UnaryOp::Sigmoid
                | UnaryOp::Silu
                | UnaryOp::HardSwish
                | UnaryOp::Tanh
                | UnaryOp::Gelu
        )
    }
}

impl BinaryOp {
    /// Every binary op, in declaration order.
    pub const ALL: [BinaryOp; 8] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Maximum,
        BinaryOp::LessThan,
        BinaryOp::Equal,
        BinaryOp::Pow,
    ];
}

impl ElemOp {
    /// Every elementwise op: the unary ops, the binary ops, then select.
    pub const ALL: [ElemOp; 34] = [
        ElemOp::Unary(UnaryOp::Neg),
        ElemOp::Unary(UnaryOp::Exp),
        ElemOp::Unary(UnaryOp::Log),
        ElemOp::Unary(UnaryOp::Sqrt),
        ElemOp::Unary(UnaryOp::Recip),
        ElemOp::Unary(UnaryOp::Tanh),
        ElemOp::Unary(UnaryOp::Erf),
        ElemOp::Unary(UnaryOp::Relu),
        ElemOp::Unary(UnaryOp::Gelu),
        ElemOp::Unary(UnaryOp::Contiguous),
        ElemOp::Unary(UnaryOp::Sigmoid),
        ElemOp::Unary(UnaryOp::Silu),
        ElemOp::Unary(UnaryOp::HardSwish),
        ElemOp::Unary(UnaryOp::Relu6),
        ElemOp::Unary(UnaryOp::Sin),
        ElemOp::Unary(UnaryOp::Cos),
        ElemOp::Unary(UnaryOp::Tan),
        ElemOp::Unary(UnaryOp::Asin),
        ElemOp::Unary(UnaryOp::Acos),
        ElemOp::Unary(UnaryOp::Atan),
        ElemOp::Unary(UnaryOp::Sinh),
        ElemOp::Unary(UnaryOp::Cosh),
        ElemOp::Unary(UnaryOp::Asinh),
        ElemOp::Unary(UnaryOp::Acosh),
        ElemOp::Unary(UnaryOp::Atanh),
        ElemOp::Binary(BinaryOp::Add),
        ElemOp::Binary(BinaryOp::Sub),
        ElemOp::Binary(BinaryOp::Mul),
        ElemOp::Binary(BinaryOp::Div),
        ElemOp::Binary(BinaryOp::Maximum),
        ElemOp::Binary(BinaryOp::LessThan),
        ElemOp::Binary(BinaryOp::Equal),
        ElemOp::Binary(BinaryOp::Pow),
        ElemOp::Select,
    ];

    /// The name in the DSL, dumps, errors, the e-graph language and the CUDA kernel
    /// (`lumen_{name}`): `neg`, `exp`, ..., `contiguous`, `add`, ..., `less_than`, `equal`,
    /// `select`.
    pub fn name(self) -> &'static str {
        match self {
            ElemOp::Unary(op) => match op {
                UnaryOp::Neg => "neg",
                UnaryOp::Exp => "exp",
                UnaryOp::Log => "log",
                UnaryOp::Sqrt => "sqrt",
                UnaryOp::Recip => "recip",
                UnaryOp::Tanh => "tanh",
                UnaryOp::Erf => "erf",
                UnaryOp::Relu => "relu",
                UnaryOp::Gelu => "gelu",
                UnaryOp::Contiguous => "contiguous",
                UnaryOp::Sigmoid => "sigmoid",
                UnaryOp::Silu => "silu",
                UnaryOp::HardSwish => "hardswish",
                UnaryOp::Relu6 => "relu6",
                UnaryOp::Sin => "sin",
                UnaryOp::Cos => "cos",
                UnaryOp::Tan => "tan",
                UnaryOp::Asin => "asin",
                UnaryOp::Acos => "acos",
                UnaryOp::Atan => "atan",
                UnaryOp::Sinh => "sinh",
                UnaryOp::Cosh => "cosh",
                UnaryOp::Asinh => "asinh",
                UnaryOp::Acosh => "acosh",
                UnaryOp::Atanh => "atanh",
            },
            ElemOp::Binary(op) => match op {
                BinaryOp::Add => "add",
                BinaryOp::Sub => "sub",
                BinaryOp::Mul => "mul",
                BinaryOp::Div => "div",
                BinaryOp::Maximum => "maximum",
                BinaryOp::LessThan => "less_than",
                BinaryOp::Equal => "equal",
                BinaryOp::Pow => "pow",
            },
            ElemOp::Select => "select",
        }
    }

    /// Operands: 1, 2 or 3.
    pub fn arity(self) -> usize {
        match self {
            ElemOp::Unary(_) => 1,
            ElemOp::Binary(_) => 2,
            ElemOp::Select => 3,
        }
    }

    /// FLOP per output element: 0 for `contiguous` (a copy), 8 for `gelu` (its tanh form),
    /// 4 for `sigmoid` and `hardswish`, 5 for `silu`, 2 for `relu6` (their arithmetic
    /// around one exp), 1 for every other op (one instruction or one library call, the
    /// convention of fvcore and XLA's cost analysis).
    pub fn flops_per_element(self) -> u64 {
        match self {
            ElemOp::Unary(UnaryOp::Contiguous) => 0,
            ElemOp::Unary(UnaryOp::Gelu) => 8,
            ElemOp::Unary(UnaryOp::Sigmoid | UnaryOp::HardSwish) => 4,
            ElemOp::Unary(UnaryOp::Silu) => 5,
            ElemOp::Unary(UnaryOp::Relu6) => 2,
            ElemOp::Unary(_) | ElemOp::Binary(_) | ElemOp::Select => 1,
        }
    }

    /// Whether swapping the two operands never changes the result, bit for bit: `add`, `mul`,
    /// `equal` (`maximum` is not: it returns its first operand on `-0` vs `+0`).
    pub fn is_commutative(self) -> bool {
        matches!(self, ElemOp::Binary(BinaryOp::Add | BinaryOp::Mul | BinaryOp::Equal))
    }

    /// The op on f32 operands (`a[i]` for operand `i`; unused slots are ignored): what the
    /// CPU runtime computes.
    #[inline(always)]
    pub fn eval_f32(self, a: [f32; 3]) -> f32 {
        let [x, y, z] = a;
        match self {
            ElemOp::Unary(op) => match op {
                UnaryOp::Neg => -x,
                UnaryOp::Exp => exp_f32(x),
                UnaryOp::Log => x.ln(),
                UnaryOp::Sqrt => x.sqrt(),
                UnaryOp::Recip => 1.0 / x,
                UnaryOp::Tanh => x.tanh(),
                UnaryOp::Erf => erf_f32(x),
                UnaryOp::Relu => relu_f32(x),
                UnaryOp::Gelu => gelu_f32(x),
                UnaryOp::Contiguous => x,
                UnaryOp::Sigmoid => sigmoid_f32(x),
                UnaryOp::Silu => silu_f32(x),
                UnaryOp::HardSwish => hardswish_f32(x),
                UnaryOp::Relu6 => relu6_f32(x),
                UnaryOp::Sin => x.sin(),
                UnaryOp::Cos => x.cos(),
                UnaryOp::Tan => x.tan(),
                UnaryOp::Asin => x.asin(),
                UnaryOp::Acos => x.acos(),
                UnaryOp::Atan => x.atan(),
                UnaryOp::Sinh => x.sinh(),
                UnaryOp::Cosh => x.cosh(),
                // libm's: std's f32 forms square x and give inf past about 1.8e19 (and libm's
                // acoshf answers below 1, where the function is undefined).
                UnaryOp::Asinh => libm::asinhf(x),
                UnaryOp::Acosh => {
                    if x < 1.0 {
                        f32::NAN
                    } else {
                        libm::acoshf(x)
                    }
                }
                UnaryOp::Atanh => x.atanh(),
            },
            ElemOp::Binary(op) => match op {
                BinaryOp::Add => x + y,
                BinaryOp::Sub => x - y,
                BinaryOp::Mul => x * y,
                BinaryOp::Div => x / y,
                BinaryOp::Maximum => {
                    if x.is_nan() || y.is_nan() {
                        f32::NAN
                    } else if x >= y {
                        x
                    } else {
                        y
                    }
                }
                BinaryOp::LessThan => f32::from(u8::from(x < y)),
                BinaryOp::Equal => f32::from(u8::from(x == y)),
                BinaryOp::Pow => x.powf(y),
            },
            ElemOp::Select => {
                if x != 0.0 {
                    y
                } else {
                    z
                }
            }
        }
    }

    /// The op on f64 operands, with the same contract as [`ElemOp::eval_f32`]: what the
    /// reference interpreter computes.
    pub fn eval_f64(self, a: [f64; 3]) -> f64 {
        let [x, y, z] = a;
        match self {
            ElemOp::Unary(op) => match op {
                UnaryOp::Neg => -x,
                UnaryOp::Exp => x.exp(),
                UnaryOp::Log => x.ln(),
                UnaryOp::Sqrt => x.sqrt(),
                UnaryOp::Recip => 1.0 / x,
                UnaryOp::Tanh => x.tanh(),
                UnaryOp::Erf => libm::erf(x),
                UnaryOp::Relu => relu_f64(x),
                UnaryOp::Gelu => gelu_f64(x),
                UnaryOp::Contiguous => x,
                UnaryOp::Sigmoid => sigmoid_f64(x),
                UnaryOp::Silu => silu_f64(x),
                UnaryOp::HardSwish => hardswish_f64(x),
                UnaryOp::Relu6 => relu6_f64(x),
                UnaryOp::Sin => x.sin(),
                UnaryOp::Cos => x.cos(),
                UnaryOp::Tan => x.tan(),
                UnaryOp::Asin => x.asin(),
                UnaryOp::Acos => x.acos(),
                UnaryOp::Atan => x.atan(),
                UnaryOp::Sinh => x.sinh(),
                UnaryOp::Cosh => x.cosh(),
                UnaryOp::Asinh => libm::asinh(x),
                UnaryOp::Acosh => {
                    if x < 1.0 {
                        f64::NAN
                    } else {
                        libm::acosh(x)
                    }
                }
                UnaryOp::Atanh => x.atanh(),
            },
            ElemOp::Binary(op) => match op {
                BinaryOp::Add => x + y,
                BinaryOp::Sub => x - y,
                BinaryOp::Mul => x * y,
                BinaryOp::Div => x / y,
                BinaryOp::Maximum => {
                    if x.is_nan() || y.is_nan() {
                        f64::NAN
                    } else if x >= y {
                        x
                    } else {
                        y
                    }
                }
                BinaryOp::LessThan => f64::from(u8::from(x < y)),
                BinaryOp::Equal => f64::from(u8::from(x == y)),
                BinaryOp::Pow => x.powf(y),
            },
            ElemOp::Select => {
                if x != 0.0 {
                    y
                } else {
                    z
                }
            }
        }
    }

    /// The body of the op's CUDA device function `float lumen_op_{name}(float a, float b,
    /// float c)` (see [`ElemOp::cuda_fn`]): one C expression over `a`, `b`, `c`, with no
    /// includes (NVRTC provides CUDA's math library: `expf`, `logf`, `sqrtf`, `tanhf`, `erff`,
    /// `fabsf`, `sinf`, `atanf`, `asinhf`, ...).
    pub fn cuda_expr(self) -> &'static str {
        match self {
            ElemOp::Unary(op) => match op {
                UnaryOp::Neg => "-a",
                UnaryOp::Exp => "expf(a)",
                UnaryOp::Log => "logf(a)",
                UnaryOp::Sqrt => "sqrtf(a)",
                UnaryOp::Recip => "1.0f / a",
                UnaryOp::Tanh => "tanhf(a)",
                UnaryOp::Erf => "erff(a)",
                UnaryOp::Relu => "a < 0.0f ? 0.0f : a",
                // The stable form of gelu_f32: t = exp(-2|z|) in (0, 1] never overflows; -inf
                // (the only value below -FLT_MAX) maps to its limit -0.
                UnaryOp::Gelu => {
                    "a < -3.40282347e+38f ? -0.0f : lumen_gelu_stable(a, 0.7978846f * a * \
                     (1.0f + 0.044715f * a * a))"
                }
                UnaryOp::Contiguous => "a",
                UnaryOp::Sigmoid => {
                    "a >= 0.0f ? 1.0f / (1.0f + expf(-a)) : expf(a) / (1.0f + expf(a))"
                }
                UnaryOp::Silu => {
                    "a < -3.40282347e+38f ? -0.0f : (a >= 0.0f ? a / (1.0f + expf(-a)) : a * \
                     expf(a) / (1.0f + expf(a)))"
                }
                UnaryOp::HardSwish => {
                    "a < -3.40282347e+38f ? -0.0f : (a <= -3.0f ? a * 0.0f : (a >= 3.0f ? a : a \
                     * (a + 3.0f) / 6.0f))"
                }
                UnaryOp::Relu6 => "a < 0.0f ? 0.0f : (a > 6.0f ? 6.0f : a)",
                UnaryOp::Sin => "sinf(a)",
                UnaryOp::Cos => "cosf(a)",
                UnaryOp::Tan => "tanf(a)",
                UnaryOp::Asin => "asinf(a)",
                UnaryOp::Acos => "acosf(a)",
                UnaryOp::Atan => "atanf(a)",
                UnaryOp::Sinh => "sinhf(a)",
                UnaryOp::Cosh => "coshf(a)",
                UnaryOp::Asinh => "asinhf(a)",
                UnaryOp::Acosh => "acoshf(a)",
                UnaryOp::Atanh => "atanhf(a)",
            },
            ElemOp::Binary(op) => match op {
                BinaryOp::Add => "a + b",
                BinaryOp::Sub => "a - b",
                BinaryOp::Mul => "a * b",
                BinaryOp::Div => "a / b",
                // a + b is NaN when either is: NumPy's maximum, unlike fmaxf.
                BinaryOp::Maximum => "(a != a || b != b) ? a + b : (a >= b ? a : b)",
                BinaryOp::LessThan => "a < b ? 1.0f : 0.0f",
                BinaryOp::Equal => "a == b ? 1.0f : 0.0f",
                BinaryOp::Pow => "powf(a, b)",
            },
            ElemOp::Select => "a != 0.0f ? b : c",
        }
    }

    /// The op's CUDA C device function, `lumen_op_{name}`, preceded by the helpers it needs.
    /// The CUDA runtime's generated kernels call it once per element.
    pub fn cuda_fn(self) -> String {
        let helper = if self == ElemOp::Unary(UnaryOp::Gelu) {
            "__device__ __forceinline__ float lumen_gelu_stable(float x, float z) {\n    \
             float t = expf(-2.0f * fabsf(z));\n    \
             return z >= 0.0f ? x / (1.0f + t) : x * t / (1.0f + t);\n}\n"
        } else {
            ""
        };
        format!(
            "{helper}__device__ __forceinline__ float lumen_op_{}(float a, float b, float c) {{\n    \
             (void)b; (void)c;\n    return {};\n}}\n",
            self.name(),
            self.cuda_expr()
        )
    }
}

impl fmt::Display for ElemOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown op name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownOp(pub String);

impl fmt::Display for UnknownOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown op `{}`", self.0)
    }
}

impl std::error::Error for UnknownOp {}

impl FromStr for ElemOp {
    type Err = UnknownOp;

    /// The op named `s` ([`ElemOp::name`]).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ElemOp::ALL.into_iter().find(|op| op.name() == s).ok_or_else(|| UnknownOp(s.to_string()))
    }
}

impl fmt::Display for UnaryOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(ElemOp::Unary(*self).name())
    }
}

impl FromStr for UnaryOp {
    type Err = UnknownOp;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.parse::<ElemOp>()? {
            ElemOp::Unary(op) => Ok(op),
            _ => Err(UnknownOp(s.to_string())),
        }
    }
}

impl fmt::Display for BinaryOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(ElemOp::Binary(*self).name())
    }
}

impl FromStr for BinaryOp {
    type Err = UnknownOp;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.parse::<ElemOp>()? {
            ElemOp::Binary(op) => Ok(op),
            _ => Err(UnknownOp(s.to_string())),
        }
    }
}

/// Exact integer elementwise ops, on i32 or i64 operands of one type (broadcast NumPy-style)
/// giving that type: what [`crate::HlirOp::IntMap`] computes. Every fact about each op lives
/// here, as [`ElemOp`]'s do for the f32 ops: its name, arity, its meaning in the operands'
/// own width ([`IntOp::eval`]: every engine's, the CPU kernels', the emulator's and, through
/// [`IntOp::eval_f64`], both f64 interpreters') and its CUDA C ([`IntOp::cuda_expr`]).
///
/// The results are exact at every value of the type, bit for bit; no op reads or writes
/// floats. The f64 interpreters hold integers as f64, so they are exact for i32 values and for
/// i64 values of magnitude up to 2^53.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IntOp {
    /// `a & b`, bit by bit (ONNX's `BitwiseAnd`).
    BitAnd,
    /// `a | b`, bit by bit (ONNX's `BitwiseOr`).
    BitOr,
    /// `a ^ b`, bit by bit (ONNX's `BitwiseXor`).
    BitXor,
    /// `!a` (C's `~a`), every bit flipped: `-a - 1` (ONNX's `BitwiseNot`).
    BitNot,
    /// `a << b`: bits moved past the sign bit are dropped (two's complement wrap-around, as
    /// the unsigned shift of C); a shift `b` outside `0..width` gives 0 (ONNX's `BitShift`
    /// `LEFT`, opset 28's rule).
    ShiftLeft,
    /// `a >> b`, arithmetic (the sign bit copied in); a shift `b` outside `0..width` gives
    /// what the sign alone gives: -1 for a negative `a`, else 0 (ONNX's `BitShift` `RIGHT`,
    /// opset 28's rule).
    ShiftRight,
}

impl IntOp {
    /// Every integer op, in declaration order.
    pub const ALL: [IntOp; 6] = [
        IntOp::BitAnd,
        IntOp::BitOr,
        IntOp::BitXor,
        IntOp::BitNot,
        IntOp::ShiftLeft,
        IntOp::ShiftRight,
    ];

    /// The name in the DSL, dumps, errors and the CUDA kernels: `bit_and`, `bit_or`,
    /// `bit_xor`, `bit_not`, `shift_left`, `shift_right`.
    pub fn name(self) -> &'static str {
        match self {
            IntOp::BitAnd => "bit_and",
            IntOp::BitOr => "bit_or",
            IntOp::BitXor => "bit_xor",
            IntOp::BitNot => "bit_not",
            IntOp::ShiftLeft => "shift_left",
            IntOp::ShiftRight => "shift_right",
        }
    }

    /// Operands: 1 (`bit_not`) or 2.
    pub fn arity(self) -> usize {
        match self {
            IntOp::BitNot => 1,
            _ => 2,
        }
    }

    /// Whether `dtype` is a type the ops compute on: i32 or i64.
    pub fn takes(dtype: DType) -> bool {
        matches!(dtype, DType::I32 | DType::I64)
    }

    /// The op on `a` and `b` (ignored by a unary op) in the width of `dtype`: 32 bits for
    /// i32 (the operands then hold i32 values, and so does the result), 64 for any other.
    /// What every engine computes.
    #[inline]
    pub fn eval(self, dtype: DType, a: i64, b: i64) -> i64 {
        let width: i64 = if dtype == DType::I32 { 32 } else { 64 };
        let outside = !(0..width).contains(&b);
        let y = match self {
            IntOp::BitAnd => a & b,
            IntOp::BitOr => a | b,
            IntOp::BitXor => a ^ b,
            IntOp::BitNot => !a,
            IntOp::ShiftLeft if outside => 0,
            // In 64 bits, then cut to the width below: the low bits are the unsigned shift's.
            IntOp::ShiftLeft => ((a as u64) << b) as i64,
            IntOp::ShiftRight if outside => {
                if a < 0 {
                    -1
                } else {
                    0
                }
            }
            IntOp::ShiftRight => a >> b,
        };
        if width == 32 { i64::from(y as i32) } else { y }
    }

    /// [`IntOp::eval`] on operands held as f64 (what both f64 interpreters carry): each
    /// operand taken as the integer it holds (they only ever hold integers of `dtype`), the
    /// result as f64. Exact for i32, and for i64 values up to 2^53 in magnitude.
    pub fn eval_f64(self, dtype: DType, a: f64, b: f64) -> f64 {
        self.eval(dtype, a as i64, b as i64) as f64
    }

    /// The op as one CUDA C expression over `a` and `b` of `dtype`'s C type (`int`, `long
    /// long`): a left shift through the unsigned type (a signed one past the sign bit is
    /// undefined in C), a right shift of the signed type (arithmetic on NVIDIA's compilers,
    /// and C++20's rule).
    pub fn cuda_expr(self, dtype: DType) -> String {
        let (unsigned, width) = match dtype {
            DType::I32 => ("unsigned int", 32),
            _ => ("unsigned long long", 64),
        };
        let outside = format!("(b < 0 || b >= {width})");
        match self {
            IntOp::BitAnd => "a & b".to_string(),
            IntOp::BitOr => "a | b".to_string(),
            IntOp::BitXor => "a ^ b".to_string(),
            IntOp::BitNot => "~a".to_string(),
            IntOp::ShiftLeft => format!("{outside} ? 0 : ({unsigned})a << b"),
            IntOp::ShiftRight => format!("{outside} ? (a < 0 ? -1 : 0) : a >> b"),
        }
    }

    /// The op's CUDA C device function for `dtype`, `lumen_int_{name}_{dtype}(T a, T b)`,
    /// which the generated integer map kernels call once per element.
    pub fn cuda_fn(self, dtype: DType) -> String {
        let t = if dtype == DType::I32 { "int" } else { "long long" };
        format!(
            "__device__ __forceinline__ {t} lumen_int_{}_{dtype}({t} a, {t} b) {{\n    \
             (void)b;\n    return ({t})({});\n}}\n",
            self.name(),
            self.cuda_expr(dtype)
        )
    }
}

impl fmt::Display for IntOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for IntOp {
    type Err = UnknownOp;

    /// The op named `s` ([`IntOp::name`]).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        IntOp::ALL.into_iter().find(|op| op.name() == s).ok_or_else(|| UnknownOp(s.to_string()))
    }
}

/// Reductions over one axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReduceOp {
    /// Sum along the axis (accumulated in f64 and rounded once on the CPU, f64 in the
    /// references); the sum of an empty axis is 0. NaN and infinities propagate by IEEE 754.
    Sum,
    /// Maximum; NaN if any element is NaN; the maximum of an empty axis is -inf (the
    /// identity). On ties between -0 and +0 the earlier element is kept.
    Max,
}

impl ReduceOp {
    /// Every reduction.
    pub const ALL: [ReduceOp; 2] = [ReduceOp::Sum, ReduceOp::Max];

    /// The name in the DSL, dumps and kernels: `sum`, `max`.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Max => "max",
        }
    }

    /// The identity, the result over an empty axis: 0 or -inf.
    pub fn identity_f32(self) -> f32 {
        match self {
            ReduceOp::Sum => 0.0,
            ReduceOp::Max => f32::NEG_INFINITY,
        }
    }

    /// Folds `x` into the running value `acc` (f32).
    #[inline]
    pub fn combine_f32(self, acc: f32, x: f32) -> f32 {
        match self {
            ReduceOp::Sum => acc + x,
            ReduceOp::Max => {
                if acc.is_nan() || x.is_nan() {
                    f32::NAN
                } else if x > acc {
                    x
                } else {
                    acc
                }
            }
        }
    }

    /// [`ReduceOp::identity_f32`] in f64.
    pub fn identity_f64(self) -> f64 {
        f64::from(self.identity_f32())
    }

    /// [`ReduceOp::combine_f32`] in f64.
    pub fn combine_f64(self, acc: f64, x: f64) -> f64 {
        match self {
            ReduceOp::Sum => acc + x,
            ReduceOp::Max => {
                if acc.is_nan() || x.is_nan() {
                    f64::NAN
                } else if x > acc {
                    x
                } else {
                    acc
                }
            }
        }
    }

    /// The identity as a CUDA C expression (no includes: `-inf` by its bits).
    pub fn cuda_identity(self) -> &'static str {
        match self {
            ReduceOp::Sum => "0.0f",
            ReduceOp::Max => "__int_as_float(0xff800000)",
        }
    }

    /// The C type a CUDA kernel accumulates in: `double` for a sum (the CPU runtime sums in
    /// f64 too, so long axes do not drift), `float` for a max (exact in any type).
    pub fn cuda_accumulator(self) -> &'static str {
        match self {
            ReduceOp::Sum => "double",
            ReduceOp::Max => "float",
        }
    }

    /// The combine step as a CUDA C expression over the running value `acc` and `x`.
    pub fn cuda_combine(self) -> &'static str {
        match self {
            ReduceOp::Sum => "acc + x",
            ReduceOp::Max => "(acc != acc || x != x) ? acc + x : (x > acc ? x : acc)",
        }
    }
}

impl fmt::Display for ReduceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ReduceOp {
    type Err = UnknownOp;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ReduceOp::ALL.into_iter().find(|op| op.name() == s).ok_or_else(|| UnknownOp(s.to_string()))
    }
}

/// How [`crate::HlirOp::ScatterElements`] combines an update with the element it lands on
/// (ONNX's `reduction` attribute): every fact about it in one place, as [`ReduceOp`]'s.
///
/// The combine is done in the data's own type ([`ScatterReduction::combine`]): f32 rounds
/// after every step, integers wrap (two's complement, as C++ on ONNX Runtime's CPU does in
/// practice). Several updates on one element combine in row-major order of the updates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScatterReduction {
    /// The update replaces the element; of several updates on one element the last in
    /// row-major order wins (on the CUDA runtime: an unspecified one).
    None,
    /// `old + update` (IEEE 754; integers wrap).
    Add,
    /// `old * update` (IEEE 754; integers wrap).
    Mul,
    /// The larger; NaN (the canonical quiet NaN) if either is NaN; of -0 and +0 the element
    /// already there stays.
    Max,
    /// The smaller; NaN (the canonical quiet NaN) if either is NaN; of -0 and +0 the element
    /// already there stays.
    Min,
}

impl ScatterReduction {
    /// Every reduction, in declaration order (its index is [`ScatterReduction::code`]).
    pub const ALL: [ScatterReduction; 5] = [
        ScatterReduction::None,
        ScatterReduction::Add,
        ScatterReduction::Mul,
        ScatterReduction::Max,
        ScatterReduction::Min,
    ];

    /// The name in dumps and ONNX's attribute: `none`, `add`, `mul`, `max`, `min`.
    pub fn name(self) -> &'static str {
        match self {
            ScatterReduction::None => "none",
            ScatterReduction::Add => "add",
            ScatterReduction::Mul => "mul",
            ScatterReduction::Max => "max",
            ScatterReduction::Min => "min",
        }
    }

    /// The number the CUDA kernels take it as (a by-value argument, so one kernel serves
    /// every reduction): its index in [`ScatterReduction::ALL`].
    pub fn code(self) -> u64 {
        match self {
            ScatterReduction::None => 0,
            ScatterReduction::Add => 1,
            ScatterReduction::Mul => 2,
            ScatterReduction::Max => 3,
            ScatterReduction::Min => 4,
        }
    }

    /// The reduction of [`ScatterReduction::code`] `code`, if any.
    pub fn from_code(code: u64) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.code() == code)
    }

    /// `update` combined into `old` (f32).
    #[inline]
    pub fn combine_f32(self, old: f32, update: f32) -> f32 {
        match self {
            ScatterReduction::None => update,
            ScatterReduction::Add => old + update,
            ScatterReduction::Mul => old * update,
            ScatterReduction::Max | ScatterReduction::Min if old.is_nan() || update.is_nan() => {
                f32::NAN
            }
            ScatterReduction::Max => {
                if update > old {
                    update
                } else {
                    old
                }
            }
            ScatterReduction::Min => {
                if update < old {
                    update
                } else {
                    old
                }
            }
        }
    }

    /// `update` combined into `old` (i64, wrapping).
    #[inline]
    pub fn combine_i64(self, old: i64, update: i64) -> i64 {
        match self {
            ScatterReduction::None => update,
            ScatterReduction::Add => old.wrapping_add(update),
            ScatterReduction::Mul => old.wrapping_mul(update),
            ScatterReduction::Max => old.max(update),
            ScatterReduction::Min => old.min(update),
        }
    }

    /// `update` combined into `old` (i32, wrapping).
    #[inline]
    pub fn combine_i32(self, old: i32, update: i32) -> i32 {
        match self {
            ScatterReduction::None => update,
            ScatterReduction::Add => old.wrapping_add(update),
            ScatterReduction::Mul => old.wrapping_mul(update),
            ScatterReduction::Max => old.max(update),
            ScatterReduction::Min => old.min(update),
        }
    }

    /// `update` combined into `old`, both values of `dtype` held as f64 (what the f64
    /// interpreters carry): the step in `dtype` itself ([`ScatterReduction::combine_f32`],
    /// [`ScatterReduction::combine_i32`], [`ScatterReduction::combine_i64`]), so every engine
    /// gets the same bits.
    pub fn combine(self, dtype: DType, old: f64, update: f64) -> f64 {
        match dtype {
            DType::I64 => self.combine_i64(old as i64, update as i64) as f64,
            DType::I32 => f64::from(self.combine_i32(old as i32, update as i32)),
            _ => f64::from(self.combine_f32(old as f32, update as f32)),
        }
    }

    /// The combine step as a CUDA C expression over the element there `a` and the update
    /// `b`, both of the C type of `dtype` (`float`, `int`, `long long`): integers wrap through
    /// their unsigned type (C's signed overflow is undefined), a float NaN is the canonical
    /// `0x7fc00000` as [`ScatterReduction::combine_f32`] writes it.
    pub fn cuda_combine(self, dtype: DType) -> String {
        let (int, unsigned) = match dtype {
            DType::I64 => (true, "unsigned long long"),
            DType::I32 => (true, "unsigned int"),
            _ => (false, ""),
        };
        let nan = "(a != a || b != b) ? __int_as_float(0x7fc00000) : ";
        match (self, int) {
            (ScatterReduction::None, _) => "b".to_string(),
            (ScatterReduction::Add, false) => "a + b".to_string(),
            (ScatterReduction::Mul, false) => "a * b".to_string(),
            (ScatterReduction::Add, true) => format!("({unsigned})a + ({unsigned})b"),
            (ScatterReduction::Mul, true) => format!("({unsigned})a * ({unsigned})b"),
            (ScatterReduction::Max, false) => format!("{nan}(b > a ? b : a)"),
            (ScatterReduction::Min, false) => format!("{nan}(b < a ? b : a)"),
            (ScatterReduction::Max, true) => "b > a ? b : a".to_string(),
            (ScatterReduction::Min, true) => "b < a ? b : a".to_string(),
        }
    }
}

impl fmt::Display for ScatterReduction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ScatterReduction {
    type Err = UnknownOp;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|r| r.name() == s).ok_or_else(|| UnknownOp(s.to_string()))
    }
}

/// An index of [`scatter_elements_f64`] outside its axis: the update's row-major position
/// and the index as given.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BadScatterIndex {
    /// Row-major position in the indices (and updates).
    pub position: usize,
    /// The index as given (before a negative one is counted from the end).
    pub index: f64,
}

/// [`crate::HlirOp::ScatterElements`] in f64, written once for both interpreters: `data`
/// (row-major, of `data_shape`, elements of `dtype` held as f64) copied, then for every
/// position `i` of `shape` (the indices' and the updates' shape) in row-major order, the
/// element at `i` with `axis` replaced by `index(i)` (negative: counted from the axis' end)
/// combined with `update(i)` by `reduction` in `dtype` ([`ScatterReduction::combine`]).
///
/// # Errors
/// The first index outside the axis, in row-major order ([`BadScatterIndex`]).
#[allow(clippy::too_many_arguments)]
pub fn scatter_elements_f64(
    mut data: Vec<f64>,
    data_shape: &[usize],
    shape: &[usize],
    axis: usize,
    reduction: ScatterReduction,
    dtype: DType,
    index: impl Fn(usize) -> f64,
    update: impl Fn(usize) -> f64,
) -> Result<Vec<f64>, BadScatterIndex> {
    let strides = crate::view::row_major_strides(data_shape);
    let extent = data_shape.get(axis).copied().unwrap_or(0) as f64;
    let count: usize = shape.iter().product();
    for flat in 0..count {
        let mut pos = crate::view::unravel(flat, shape);
        let raw = index(flat);
        let id = if raw < 0.0 { raw + extent } else { raw };
        if !(0.0..extent).contains(&id) {
            return Err(BadScatterIndex { position: flat, index: raw });
        }
        pos[axis] = id as usize;
        let at: usize = pos.iter().zip(&strides).map(|(p, s)| p * s).sum();
        data[at] = reduction.combine(dtype, data[at], update(flat));
    }
    Ok(data)
}

/// The position of the largest (`max`) or smallest of `values` ([`crate::HlirOp::Arg`]): the
/// first on ties, or the last when `last`; the first NaN wins outright (NumPy's `argmax`).
/// 0 for no values.
pub fn arg_index<T: PartialOrd + Copy>(
    values: impl IntoIterator<Item = T>,
    max: bool,
    last: bool,
) -> usize {
    let mut best: Option<(usize, T)> = None;
    for (i, v) in values.into_iter().enumerate() {
        #[allow(clippy::eq_op)]
        let nan = v != v;
        match best {
            None => best = Some((i, v)),
            Some((_, b)) => {
                #[allow(clippy::eq_op)]
                if b != b {
                    break;
                }
                let better =
                    nan || if max { v > b || (last && v == b) } else { v < b || (last && v == b) };
                if better {
                    best = Some((i, v));
                }
            }
        }
        if nan {
            break;
        }
    }
    best.map_or(0, |(i, _)| i)
}

/// The positions of the `k` largest (`largest`) or smallest of `values`, in order
/// ([`crate::HlirOp::TopK`]): largest (smallest) first, equal values by position, NaN before
/// every number when `largest` and after every number otherwise (the order of a descending sort
/// that counts NaN as the largest). At most `values`' length.
pub fn top_k<T: PartialOrd + Copy>(values: &[T], k: usize, largest: bool) -> Vec<usize> {
    #[allow(clippy::eq_op)]
    let is_nan = |v: T| v != v;
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| {
        let (x, y) = (values[a], values[b]);
        let by_value = match (is_nan(x), is_nan(y)) {
            (true, true) => std::cmp::Ordering::Equal,
            (true, false) => std::cmp::Ordering::Greater,
            (false, true) => std::cmp::Ordering::Less,
            _ => x.partial_cmp(&y).unwrap_or(std::cmp::Ordering::Equal),
        };
        let by_value = if largest { by_value.reverse() } else { by_value };
        by_value.then(a.cmp(&b))
    });
    order.truncate(k);
    order
}

/// relu in f32: `x < 0 ? 0 : x`, so NaN stays NaN and -0 stays -0.
#[inline]
pub fn relu_f32(x: f32) -> f32 {
    if x < 0.0 { 0.0 } else { x }
}

/// relu in f64 with the same contract as [`relu_f32`].
pub fn relu_f64(x: f64) -> f64 {
    if x < 0.0 { 0.0 } else { x }
}

/// ReLU6 in f32: `min(max(x, 0), 6)` written as [`relu_f32`] then a cap, so NaN stays NaN
/// and -0 stays -0.
#[inline(always)]
pub fn relu6_f32(x: f32) -> f32 {
    let r = relu_f32(x);
    if r > 6.0 { 6.0 } else { r }
}

/// [`relu6_f32`] in f64.
pub fn relu6_f64(x: f64) -> f64 {
    let r = relu_f64(x);
    if r > 6.0 { 6.0 } else { r }
}

/// The logistic sigmoid in f32, in the form that never overflows: with `t = e^-|x|` in
/// `(0, 1]` ([`exp_nonpositive_f32`], so a loop vectorizes), `1 / (1 + t)` for `x >= 0` and
/// `t / (1 + t)` below. sigmoid(+inf) = 1, sigmoid(-inf) = 0, NaN in, NaN out; within a few
/// ulps everywhere (the naive `1 / (1 + e^-x)` is as accurate but overflows `e^-x` below -88).
#[inline(always)]
pub fn sigmoid_f32(x: f32) -> f32 {
    let t = exp_nonpositive_f32(-x.abs());
    if x >= 0.0 { 1.0 / (1.0 + t) } else { t / (1.0 + t) }
}

/// [`sigmoid_f32`] in f64, the same form.
pub fn sigmoid_f64(x: f64) -> f64 {
    let t = (-x.abs()).exp();
    if x >= 0.0 { 1.0 / (1.0 + t) } else { t / (1.0 + t) }
}

/// SiLU `x * sigmoid(x)` in f32, as `x / (1 + t)` for `x >= 0` and `x t / (1 + t)` below
/// (`t = e^-|x|`, as [`sigmoid_f32`]). silu(+inf) = +inf; silu(-inf) = -0, the limit (the
/// product form gives `-inf * 0 = NaN`, which ONNX Runtime's `x * Sigmoid(x)` returns).
#[inline(always)]
pub fn silu_f32(x: f32) -> f32 {
    if x == f32::NEG_INFINITY {
        return -0.0;
    }
    let t = exp_nonpositive_f32(-x.abs());
    if x >= 0.0 { x / (1.0 + t) } else { x * t / (1.0 + t) }
}

/// [`silu_f32`] in f64, the same form and limits.
pub fn silu_f64(x: f64) -> f64 {
    if x == f64::NEG_INFINITY {
        return -0.0;
    }
    let t = (-x.abs()).exp();
    if x >= 0.0 { x / (1.0 + t) } else { x * t / (1.0 + t) }
}

/// Hard swish in f32: `x * relu6(x + 3) / 6` as PyTorch's `hardswish` computes it: `x` from 3
/// up, `x * 0` from -3 down (-0 for a negative `x`, and -0 at -inf, the limit, where the
/// product would be NaN), NaN in, NaN out.
#[inline(always)]
pub fn hardswish_f32(x: f32) -> f32 {
    if x == f32::NEG_INFINITY {
        -0.0
    } else if x <= -3.0 {
        x * 0.0
    } else if x >= 3.0 {
        x
    } else {
        x * (x + 3.0) / 6.0
    }
}

/// [`hardswish_f32`] in f64.
pub fn hardswish_f64(x: f64) -> f64 {
    if x == f64::NEG_INFINITY {
        -0.0
    } else if x <= -3.0 {
        x * 0.0
    } else if x >= 3.0 {
        x
    } else {
        x * (x + 3.0) / 6.0
    }
}

/// GELU, tanh form (Hendrycks & Gimpel; what PyTorch's `approximate="tanh"` computes):
/// `0.5 x (1 + tanh(z))` with `z = sqrt(2/pi) (x + 0.044715 x^3)`, evaluated in the
/// algebraically identical form `x / (1 + exp(-2z))` (`0.5 (1 + tanh z)` is the logistic
/// sigmoid of `2z`).
///
/// The textbook form cancels on the negative tail: for `x < -4`, `1 + tanh(z)` is 1 minus a
/// number within a few ulps of 1, so gelu(-5) came out as -2.98e-7 instead of -2.29e-7 and
/// every `x <= -6` as -0 instead of about -8e-11. Here the sigmoid is evaluated with
/// `t = exp(-2|z|)` in `(0, 1]`, which never overflows: `x / (1 + t)` for `z >= 0` and
/// `x t / (1 + t)` for `z < 0`, each a product of well-conditioned factors, so the relative
/// error stays within a few ulps of f32 times `|2z|` (the rounding of `z` itself) down to the
/// subnormal range. Limits: gelu(+inf) = +inf, gelu(-inf) = -0 (the limit is 0, approached from
/// below; the formula alone would give `-inf * 0 = NaN`); NaN in, NaN out.
///
/// `t` comes from [`exp_nonpositive_f32`], all in f32, so a loop over this function runs 16
/// lanes wide with AVX-512 (the f64 [`exp_f32`] ran 8 wide with a table gather: the fused GELU
/// epilogue took 1.3 ns an element, 14% of the built-in transformer's CPU execute).
///
/// The CPU runtime's elementwise kernel and its fused GELU epilogue both call this; the CUDA
/// kernels use the same form ([`ElemOp::cuda_fn`]), while cuBLASLt's `GELU` epilogue is
/// NVIDIA's own implementation.
#[inline(always)]
pub fn gelu_f32(x: f32) -> f32 {
    if x == f32::NEG_INFINITY {
        return -0.0;
    }
    let z = SQRT_2_OVER_PI_F64 as f32 * x * (1.0 + 0.044_715 * x * x);
    let t = exp_nonpositive_f32(-2.0 * z.abs());
    if z >= 0.0 { x / (1.0 + t) } else { x * t / (1.0 + t) }
}

/// The error function in f32, as straight-line arithmetic that vectorizes (16 lanes with
/// AVX-512), where a loop calling libm's `erff` made one call per element: erf-GELU (PyTorch's
/// default `nn.GELU()`, a composite of `mul`, `erf` and `add`) spent 35% of the digits ViT's
/// CPU execute in those calls. Odd, so computed for `a = |x|` and given `x`'s sign:
/// - `a < 1`: `a · P(a²)`, `P` of degree 6 (a least-squares fit of `erf(a) / a` at Chebyshev
///   nodes of `[0, 1]`; relative error 1.6e-9 before f32 rounding).
/// - `1 <= a < 4`: `1 - exp(-a²) · Q(v)`, `v = (1/a - 0.625) / 0.375` in `[-1, 1]`, `Q` of degree
///   9 fitted the same way to `erfc(a) · exp(a²)` (relative error 3e-9), `exp` from
///   [`exp_nonpositive_f32`]. `erfc(a) <= 0.16` there, so its error reaches `erf` scaled down.
/// - `a >= 4` (and infinities): 1 (`erf(4)` is within 1.6e-8 of 1, below half an f32 ulp).
///
/// Within 3 ulps of the exact value (2 on the tests' sweep of 5 million inputs); `erf(±0) = ±0`,
/// NaN in, NaN out. The fits are lumen's own (`numpy.polyfit` on Chebyshev nodes, coefficients
/// rounded to f32).
#[inline(always)]
pub fn erf_f32(x: f32) -> f32 {
    const P: [f32; 7] = [
        7.933_494e-5,
        -8.034_846_4e-4,
        5.191_218_6e-3,
        -2.685_54e-2,
        0.112_836_26,
        -0.376_126_3,
        std::f32::consts::FRAC_2_SQRT_PI, // the fit's constant term, rounded to f32
    ];
    const Q: [f32; 10] = [
        4.138_928_5e-6,
        -2.779_157_5e-6,
        -2.880_340_6e-5,
        1.242_094_3e-4,
        -3.475_714_8e-4,
        4.599_364_2e-4,
        2.307_870_2e-3,
        -2.424_283_5e-2,
        0.143_356_43,
        0.305_953,
    ];
    let a = x.abs();
    let t = a * a;
    let mut p = P[0];
    for &c in &P[1..] {
        p = p.mul_add(t, c);
    }
    let small = a * p;
    let v = (1.0 / a - 0.625) / 0.375;
    let mut q = Q[0];
    for &c in &Q[1..] {
        q = q.mul_add(v, c);
    }
    let large = 1.0 - exp_nonpositive_f32(-t) * q;
    let e = if a < 1.0 {
        small
    } else if a < 4.0 {
        large
    } else if a.is_nan() {
        a
    } else {
        1.0
    };
    e.copysign(x)
}

/// `e^y` for `y <= 0` (or NaN), all in f32: within 2 ulps of the exact value (1 on the
/// tests' sweep of 3 million inputs) down to the subnormal range, where the result is rounded
/// once (`exp(-inf) = 0`, NaN in, NaN out; positive `y` is outside its contract). Cody and
/// Waite's reduction: `n = round(y / ln 2)`, `r = y - n ln 2` (with `ln 2` split in two f32 parts and fused multiply-adds, exact), so
/// `|r| <= ln 2 / 2`; `e^r` by its Taylor polynomial of degree 7 (truncation below 1e-8
/// relative); then `2^n` as two exponent-field scalings of at most `2^-76` each, so a result
/// below `f32::MIN_POSITIVE` is rounded once, by the last multiply. Straight-line arithmetic
/// with the special cases selected after, no table: a loop over it vectorizes at full f32
/// width. Every instruction set gives the same bits (`mul_add` is fused everywhere).
#[inline(always)]
pub fn exp_nonpositive_f32(y: f32) -> f32 {
    // 1.5 · 2^23: adding it rounds a value below 2^22 in magnitude to an integer (ties to
    // even), held in the low mantissa bits.
    const SHIFT: f32 = 12_582_912.0;
    const LN2_HI: f32 = std::f32::consts::LN_2;
    // ln 2 - LN2_HI, to f32.
    const LN2_LO: f32 = -1.904_654_3e-9;
    // Below this `e^y` rounds to 0 (ln 2^-150 = -103.97); clamping here keeps `n` >= -150.
    const LOW: f32 = -104.0;
    let yc = y.max(LOW);
    let shifted = yc.mul_add(std::f32::consts::LOG2_E, SHIFT);
    let n = shifted - SHIFT;
    let ni = (shifted.to_bits() as i32).wrapping_sub(SHIFT.to_bits() as i32);
    let r = n.mul_add(-LN2_HI, yc);
    let r = n.mul_add(-LN2_LO, r);
    let mut p: f32 = 1.0 / 5040.0;
    for c in [1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0] {
        p = p.mul_add(r, c);
    }
    // 2^n = 2^n1 · 2^n2 with n1, n2 >= -75: each factor a normal f32.
    let n1 = ni >> 1;
    let n2 = ni - n1;
    let scale = |k: i32| f32::from_bits(((k + 127) as u32) << 23);
    let e = p * scale(n1) * scale(n2);
    if y < LOW {
        0.0
    } else if y.is_nan() {
        y
    } else {
        e
    }
}

/// `e^x` in f32, by the algorithm of glibc's `expf` (Szabolcs Nagy's, from Arm's
/// optimized-routines; glibc 2.27 on): with `k = round(x · 32 / ln 2)` and
/// `r = x · 32 / ln 2 - k`, `e^x = 2^(k / 32) · 2^(r / 32)`, the first factor from a table of
/// the 32 values `2^(i / 32)` (exponent bits added to the entry), the second a cubic in `r`,
/// all in f64 with fused multiply-adds, rounded to f32 once (error within 0.502 ulp).
/// Written as straight-line arithmetic with one table read (the special cases chosen after,
/// not branched to), so a loop over it vectorizes, where a loop calling the C library's
/// `expf` makes one call per element (the fused GELU epilogue once spent about half of the
/// built-in transformer's CPU execute in those calls).
///
/// Bit-identical to glibc's `expf` (its FMA variant, the one x86-64 CPUs with FMA run) on
/// every one of the 2^32 f32 inputs, checked exhaustively when it was written; `f32::exp`
/// calls the platform's C library, so on other platforms the two may differ in the last bit.
/// Limits as `expf`: `+inf` above `0x1.62e42ep6` (the log of `f32::MAX`), `+0` below
/// `-0x1.9fe368p6` (the log of half the smallest subnormal), NaN in, NaN out.
#[inline(always)]
pub fn exp_f32(x: f32) -> f32 {
    // 2^(i/32) as f64 bits, less i/32 in the exponent field (`bits - (i << 52) / 32`), so
    // that adding `k << 47` to entry `k mod 32` gives 2^(k/32) whatever k's sign.
    const TABLE: [u64; 32] = [
        0x3ff0000000000000,
        0x3fefd9b0d3158574,
        0x3fefb5586cf9890f,
        0x3fef9301d0125b51,
        0x3fef72b83c7d517b,
        0x3fef54873168b9aa,
        0x3fef387a6e756238,
        0x3fef1e9df51fdee1,
        0x3fef06fe0a31b715,
        0x3feef1a7373aa9cb,
        0x3feedea64c123422,
        0x3feece086061892d,
        0x3feebfdad5362a27,
        0x3feeb42b569d4f82,
        0x3feeab07dd485429,
        0x3feea47eb03a5585,
        0x3feea09e667f3bcd,
        0x3fee9f75e8ec5f74,
        0x3feea11473eb0187,
        0x3feea589994cce13,
        0x3feeace5422aa0db,
        0x3feeb737b0cdc5e5,
        0x3feec49182a3f090,
        0x3feed503b23e255d,
        0x3feee89f995ad3ad,
        0x3feeff76f2fb5e47,
        0x3fef199bdd85529c,
        0x3fef3720dcef9069,
        0x3fef5818dcfba487,
        0x3fef7c97337b9b5f,
        0x3fefa4afa2a490da,
        0x3fefd0765b6e4540,
    ];
    const N: f64 = 32.0;
    // 1.5 · 2^52: adding it rounds a value below 2^51 to an integer, held in the low bits.
    const SHIFT: f64 = 6_755_399_441_055_744.0;
    // 32 / ln 2, and the cubic approximating 2^(r/32) - 1 on |r| <= 1/2 (coefficients of
    // 2^y on |y| <= 1/64, divided by 32^3, 32^2 and 32).
    const INV_LN2_N: f64 = std::f64::consts::LOG2_E * N;
    let c0 = f64::from_bits(0x3fac_6af8_4b91_2394) / (N * N * N);
    let c1 = f64::from_bits(0x3fce_bfce_50fa_c4f3) / (N * N);
    let c2 = f64::from_bits(0x3fe6_2e42_ff0c_52d6) / N;
    let xd = f64::from(x);
    let shifted = INV_LN2_N.mul_add(xd, SHIFT);
    let ki = shifted.to_bits();
    let kd = shifted - SHIFT;
    let r = INV_LN2_N.mul_add(xd, -kd);
    let s = f64::from_bits(TABLE[(ki % 32) as usize].wrapping_add(ki << 47));
    let p = c0.mul_add(r, c1);
    let y = p.mul_add(r * r, c2.mul_add(r, 1.0)) * s;
    if x > f32::from_bits(0x42b1_7217) {
        f32::INFINITY
    } else if x < f32::from_bits(0xc2cf_f1b4) {
        0.0
    } else if x.is_nan() {
        x + x
    } else {
        y as f32
    }
}

/// GELU, tanh form, in f64, in the same stable form as [`gelu_f32`]. Even in f64 the
/// textbook form cancels: it returns 0 from x = -8 down, where the value is -3.1e-21.
/// gelu(+inf) = +inf, gelu(-inf) = -0 (the limit), NaN in, NaN out.
pub fn gelu_f64(x: f64) -> f64 {
    if x == f64::NEG_INFINITY {
        return -0.0;
    }
    let z = SQRT_2_OVER_PI_F64 * x * (1.0 + 0.044_715 * x * x);
    let t = (-2.0 * z.abs()).exp();
    if z >= 0.0 { x / (1.0 + t) } else { x * t / (1.0 + t) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every one of the 2^32 f32 inputs against the C library's `expf`: the check behind
    /// `exp_f32`'s claim (about 2 minutes optimized; ignored by default:
    /// `cargo test --release -p lumen-compiler exp_f32_on_every_input -- --ignored`).
    #[test]
    #[ignore = "2^32 inputs: run it optimized, on demand"]
    fn exp_f32_on_every_input() {
        if !cfg!(all(target_os = "linux", target_env = "gnu")) {
            return;
        }
        let differ = (0u32..=u32::MAX)
            .filter(|&b| {
                let x = f32::from_bits(b);
                let (got, want) = (exp_f32(x), x.exp());
                got.to_bits() != want.to_bits() && !(got.is_nan() && want.is_nan())
            })
            .count();
        assert_eq!(differ, 0, "exp_f32 and glibc's expf differ on {differ} inputs");
    }

    /// `exp_f32` against the C library's `expf` (`f32::exp`) on a sweep of inputs: the same
    /// bits on glibc (exhaustively checked when written), within an ulp anywhere; the limits.
    #[test]
    fn exp_f32_is_the_c_librarys_expf() {
        let mut same = 0usize;
        let mut total = 0usize;
        for b in (0u32..=u32::MAX).step_by(4099) {
            let x = f32::from_bits(b);
            let (got, want) = (exp_f32(x), x.exp());
            if want.is_nan() {
                assert!(got.is_nan(), "exp({x})");
                continue;
            }
            total += 1;
            same += usize::from(got.to_bits() == want.to_bits());
            let ulps = (i64::from(got.to_bits()) - i64::from(want.to_bits())).abs();
            assert!(ulps <= 1, "exp({x:e}) = {got:e}, the C library gives {want:e}");
        }
        if cfg!(all(target_os = "linux", target_env = "gnu")) {
            assert_eq!(same, total, "glibc's expf differs on {} inputs", total - same);
        }
        assert_eq!(exp_f32(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp_f32(f32::NEG_INFINITY).to_bits(), 0);
        assert_eq!(exp_f32(89.0), f32::INFINITY);
        assert_eq!(exp_f32(-104.0).to_bits(), 0);
        assert_eq!(exp_f32(0.0), 1.0);
        assert!(exp_f32(f32::NAN).is_nan());
    }

    /// `exp_nonpositive_f32` against f64's `exp` on a sweep of every non-positive f32 (and a
    /// dense one of `[-1, 0]`): within 2 ulps where the result is a normal f32, within an ulp
    /// of 2^-149 below; 0 from -104 down and for -inf; NaN in, NaN out.
    #[test]
    fn exp_nonpositive_f32_is_within_two_ulps() {
        let mut worst = 0i64;
        let sweep = (0x8000_0000u32..=0xff80_0000).step_by(997);
        let dense = (0..=1 << 20).map(|i| -(i as f32) / (1 << 20) as f32);
        for y in sweep.map(f32::from_bits).chain(dense) {
            let got = exp_nonpositive_f32(y);
            let exact = f64::from(y).exp();
            if exact >= f64::from(f32::MIN_POSITIVE) {
                let ulps = (i64::from(got.to_bits()) - i64::from((exact as f32).to_bits())).abs();
                worst = worst.max(ulps);
            } else {
                let tiny = f64::from(f32::from_bits(1));
                assert!((f64::from(got) - exact).abs() <= tiny, "exp({y:e}) = {got:e}");
            }
        }
        assert!(worst <= 2, "exp_nonpositive_f32 is {worst} ulps off");
        assert_eq!(exp_nonpositive_f32(0.0), 1.0);
        assert_eq!(exp_nonpositive_f32(-0.0), 1.0);
        assert_eq!(exp_nonpositive_f32(-104.0).to_bits(), 0);
        assert_eq!(exp_nonpositive_f32(f32::NEG_INFINITY).to_bits(), 0);
        assert!(exp_nonpositive_f32(f32::NAN).is_nan());
    }

    /// `erf_f32` against libm's f64 `erf` on a sweep of every f32 (and a dense one of
    /// `[0, 5]`): within 3 ulps of the value rounded to f32; odd; the limits.
    #[test]
    fn erf_f32_is_within_three_ulps() {
        let mut worst = 0i64;
        let sweep = (0u32..=u32::MAX).step_by(997).map(f32::from_bits);
        let dense = (0..=1 << 20).map(|i| 5.0 * i as f32 / (1 << 20) as f32);
        for x in sweep.chain(dense) {
            let got = erf_f32(x);
            if x.is_nan() {
                assert!(got.is_nan());
                continue;
            }
            let want = libm::erf(f64::from(x)) as f32;
            let ulps = (i64::from(got.to_bits() as i32) - i64::from(want.to_bits() as i32)).abs();
            worst = worst.max(ulps);
            assert_eq!(erf_f32(-x).to_bits(), (-got).to_bits(), "erf(-{x:e})");
        }
        assert!(worst <= 3, "erf_f32 is {worst} ulps off");
        assert_eq!(erf_f32(f32::INFINITY), 1.0);
        assert_eq!(erf_f32(f32::NEG_INFINITY), -1.0);
        assert_eq!(erf_f32(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(erf_f32(0.0).to_bits(), 0);
    }

    /// Awkward operands: zeros of both signs, infinities, NaN, subnormals, tails.
    const SPECIALS: [f32; 16] = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -2.5,
        10.0,
        -10.0,
        88.0,
        -104.0,
        1e-40,
        -1e-40,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        3.4e38,
    ];

    #[test]
    fn all_lists_every_op_once_and_names_round_trip() {
        let mut names: Vec<&str> = ElemOp::ALL.iter().map(|op| op.name()).collect();
        assert_eq!(names.len(), UnaryOp::ALL.len() + BinaryOp::ALL.len() + 1);
        for op in ElemOp::ALL {
            assert_eq!(op.name().parse::<ElemOp>(), Ok(op));
            assert_eq!(op.to_string(), op.name());
            match op {
                ElemOp::Unary(u) => assert!(UnaryOp::ALL.contains(&u)),
                ElemOp::Binary(b) => assert!(BinaryOp::ALL.contains(&b)),
                ElemOp::Select => {}
            }
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ElemOp::ALL.len());
        assert!("nope".parse::<ElemOp>().is_err());
        for op in ReduceOp::ALL {
            assert_eq!(op.name().parse::<ReduceOp>(), Ok(op));
        }
    }

    /// f32 against f64 on every special operand combination: the same NaN-ness, the same
    /// sign of zero, the same infinities, and finite values within a relative 2e-5 (the f32
    /// libraries' accuracy; gelu's z rounding), or both below f32's normal range.
    #[test]
    fn eval_f32_keeps_the_contract_of_eval_f64() {
        for op in ElemOp::ALL {
            for &a in &SPECIALS {
                for &b in &SPECIALS {
                    for &c in &[0.0f32, 1.0, f32::NAN] {
                        let (x, y, z) = (a, b, if op == ElemOp::Select { c } else { 2.0 });
                        let got = op.eval_f32([x, y, z]);
                        let want = op.eval_f64([f64::from(x), f64::from(y), f64::from(z)]);
                        let what = format!("{}({x}, {y}, {z}) = {got:e}, f64 {want:e}", op.name());
                        assert_eq!(got.is_nan(), want.is_nan(), "{what}");
                        if want.is_nan() {
                            continue;
                        }
                        let want32 = want as f32;
                        if want32.is_infinite() || want32 == 0.0 {
                            // Overflow and underflow as f32 agree with the rounded f64 value.
                            assert!(
                                got == want32 || (got.abs() < 1e-37 && want.abs() < 1e-37),
                                "{what}"
                            );
                            if want == 0.0 {
                                assert_eq!(
                                    got.is_sign_negative(),
                                    want.is_sign_negative(),
                                    "{what}"
                                );
                            }
                        } else if want.abs() >= f64::from(f32::MIN_POSITIVE) {
                            let rel = (f64::from(got) - want).abs() / want.abs();
                            // gelu: f32's rounding of z magnified by |2z| (87 at x = -10).
                            assert!(rel < 2e-5, "{what}, rel {rel:e}");
                        } else {
                            assert!((f64::from(got) - want).abs() < 1e-37, "{what}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn contracts_on_special_values() {
        let e = |op: ElemOp, a: f32, b: f32| op.eval_f32([a, b, 0.0]);
        let relu = ElemOp::Unary(UnaryOp::Relu);
        assert!(e(relu, f32::NAN, 0.0).is_nan());
        assert!(e(relu, -0.0, 0.0).is_sign_negative());
        let max = ElemOp::Binary(BinaryOp::Maximum);
        assert!(e(max, f32::NAN, 1.0).is_nan() && e(max, 1.0, f32::NAN).is_nan());
        assert!(e(max, -0.0, 0.0).is_sign_negative());
        assert_eq!(e(ElemOp::Binary(BinaryOp::LessThan), f32::NAN, 1.0), 0.0);
        assert_eq!(e(ElemOp::Binary(BinaryOp::Equal), -0.0, 0.0), 1.0);
        assert_eq!(ElemOp::Select.eval_f32([f32::NAN, 1.0, 2.0]), 1.0);
        assert_eq!(ElemOp::Select.eval_f32([0.0, 1.0, 2.0]), 2.0);
        assert_eq!(e(ElemOp::Unary(UnaryOp::Recip), -0.0, 0.0), f32::NEG_INFINITY);
        assert_eq!(e(ElemOp::Unary(UnaryOp::Erf), f32::INFINITY, 0.0), 1.0);
        let gelu = ElemOp::Unary(UnaryOp::Gelu);
        assert_eq!(e(gelu, f32::INFINITY, 0.0), f32::INFINITY);
        assert!(e(gelu, f32::NEG_INFINITY, 0.0).is_sign_negative());
        let sigmoid = ElemOp::Unary(UnaryOp::Sigmoid);
        assert_eq!(
            (e(sigmoid, f32::INFINITY, 0.0), e(sigmoid, f32::NEG_INFINITY, 0.0)),
            (1.0, 0.0)
        );
        assert_eq!(e(sigmoid, 0.0, 0.0), 0.5);
        assert!(e(sigmoid, f32::NAN, 0.0).is_nan());
        let silu = ElemOp::Unary(UnaryOp::Silu);
        assert_eq!(e(silu, f32::INFINITY, 0.0), f32::INFINITY);
        assert_eq!(e(silu, f32::NEG_INFINITY, 0.0).to_bits(), (-0.0f32).to_bits());
        assert!(e(silu, f32::NAN, 0.0).is_nan());
        let hs = ElemOp::Unary(UnaryOp::HardSwish);
        assert_eq!([e(hs, -4.0, 0.0), e(hs, 1.5, 0.0), e(hs, 3.0, 0.0)], [-0.0, 1.125, 3.0]);
        assert!(e(hs, -4.0, 0.0).is_sign_negative() && e(hs, f32::NAN, 0.0).is_nan());
        let relu6 = ElemOp::Unary(UnaryOp::Relu6);
        assert_eq!([e(relu6, -1.0, 0.0), e(relu6, 2.5, 0.0), e(relu6, 7.0, 0.0)], [0.0, 2.5, 6.0]);
        assert!(e(relu6, -0.0, 0.0).is_sign_negative() && e(relu6, f32::NAN, 0.0).is_nan());
        assert!(ReduceOp::Max.combine_f32(1.0, f32::NAN).is_nan());
        assert!(ReduceOp::Max.combine_f32(f32::NAN, 1.0).is_nan());
        assert!(ReduceOp::Max.combine_f32(-0.0, 0.0).is_sign_negative());
        assert_eq!(ReduceOp::Max.identity_f32(), f32::NEG_INFINITY);
    }

    /// The integer ops by hand, at the values of ONNX's BitShift and Bitwise cases: shifts
    /// past the sign bit, outside `0..width` both ways, arithmetic right shifts; the names.
    #[test]
    fn int_ops_by_hand() {
        use DType::{I32, I64};
        let e = |op: IntOp, d: DType, pairs: &[(i64, i64)]| -> Vec<i64> {
            pairs.iter().map(|&(a, b)| op.eval(d, a, b)).collect()
        };
        let (min32, max32) = (i64::from(i32::MIN), i64::from(i32::MAX));
        assert_eq!(e(IntOp::ShiftLeft, I32, &[(16, 1), (4, 2), (1, 3)]), [32, 16, 8]);
        assert_eq!(
            e(IntOp::ShiftLeft, I32, &[(1 << 30, 1), (1, 31), (-(1 << 30), 1)]),
            [min32, min32, min32]
        );
        assert_eq!(
            e(IntOp::ShiftLeft, I32, &[(-8, 32), (4, 33), (-1, 100), (-8, -1)]),
            [0, 0, 0, 0]
        );
        assert_eq!(
            e(IntOp::ShiftRight, I32, &[(-8, 1), (-1, 1), (min32, 1)]),
            [-4, -1, -(1 << 30)]
        );
        assert_eq!(
            e(IntOp::ShiftRight, I32, &[(-8, -1), (4, -32), (-1, 64), (4, 32)]),
            [-1, 0, -1, 0]
        );
        // 32 is inside an i64's width, 64 outside.
        assert_eq!(e(IntOp::ShiftLeft, I64, &[(1, 32), (1, 63), (1, 64)]), [1 << 32, i64::MIN, 0]);
        assert_eq!(e(IntOp::ShiftRight, I64, &[(i64::MIN, 63), (i64::MIN, 64)]), [-1, -1]);
        assert_eq!(e(IntOp::BitNot, I32, &[(-356_387_803, 0), (max32, 0)]), [356_387_802, min32]);
        assert_eq!(e(IntOp::BitAnd, I64, &[(0b1100, 0b1010), (-1, i64::MAX)]), [0b1000, i64::MAX]);
        assert_eq!(e(IntOp::BitOr, I32, &[(0b1100, 0b1010), (min32, 1)]), [0b1110, min32 + 1]);
        assert_eq!(e(IntOp::BitXor, I32, &[(2_135_392_491, 2_135_392_491), (-1, 0)]), [0, -1]);
        assert_eq!(IntOp::ShiftRight.eval_f64(I32, -8.0, 1.0), -4.0);
        for op in IntOp::ALL {
            assert_eq!(op.name().parse::<IntOp>(), Ok(op));
            for d in [I32, I64] {
                let f = op.cuda_fn(d);
                assert!(f.contains(&format!("lumen_int_{}_{d}(", op.name())), "{f}");
                assert!(!f.contains("INFINITY"), "{f}");
            }
        }
        assert!(IntOp::takes(I32) && IntOp::takes(I64) && !IntOp::takes(DType::F32));
    }

    #[test]
    fn flops_commutativity_and_epilogues() {
        assert_eq!(ElemOp::Unary(UnaryOp::Gelu).flops_per_element(), 8);
        assert_eq!(ElemOp::Unary(UnaryOp::Contiguous).flops_per_element(), 0);
        assert_eq!(ElemOp::Binary(BinaryOp::Add).flops_per_element(), 1);
        assert!(ElemOp::Binary(BinaryOp::Add).is_commutative());
        assert!(!ElemOp::Binary(BinaryOp::Maximum).is_commutative());
        assert!(!ElemOp::Binary(BinaryOp::Sub).is_commutative());
        assert_eq!(UnaryOp::Relu.epilogue_activation(), Some(UnaryOp::Relu));
        assert_eq!(UnaryOp::Erf.epilogue_activation(), None);
        for op in ElemOp::ALL {
            let f = op.cuda_fn();
            assert!(f.contains(&format!("lumen_op_{}(", op.name())), "{f}");
        }
    }
}
