//! The layers a network declared in an experiment holds (`network "layers" { layers { ... } }`),
//! each declared once with its name, meaning and parameters ([`LAYERS`]), and the one rule for
//! the shape each gives ([`shapes`]). The config's schema, parser and canonical form read the
//! table; its checks and `validate --deep` compute the shapes by the rule, at the layer that
//! does not fit; the network builds its layers from the same values after the same rule, so
//! what the config accepts builds and what it refuses is refused in the same words.

use crate::wrapper::{Param, Range, Value, param};

/// One layer of a declared network, with its parameters as the config states them. A list of
/// layers applies them in order to a batch of observations (`[B, ...shape]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layer {
    /// A fully connected layer of `out` units over the flattened input (with a bias).
    Linear { out: u32 },
    /// A 2-D convolution of `out` channels over a `[C, H, W]` input: `kernel` x `kernel`
    /// windows `stride` apart, `padding` zeros around the picture (with a bias).
    Conv {
        out: u32,
        kernel: u32,
        stride: u32,
        padding: u32,
    },
    /// The largest value of each `kernel` x `kernel` window, `stride` apart, over a
    /// `[C, H, W]` input (`padding` below the smallest value around the picture).
    MaxPool {
        kernel: u32,
        stride: u32,
        padding: u32,
    },
    /// The input as one vector.
    Flatten,
    /// Each row's values (all of them, whatever the shape) normalised to mean 0 and variance 1,
    /// then scaled and shifted element-wise by learned weights (ones and zeros at the start).
    LayerNorm,
    /// An element-wise nonlinearity.
    Activation(Activation),
    /// Raw 0..255 pixels to 0..1: the input multiplied by 1/255.
    ScalePixels,
    /// `x + body(x)`: the body's layers must give back the shape they read.
    Residual { body: Vec<Layer> },
}

/// The element-wise nonlinearities a layer list may hold, each a layer of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    Relu,
    Tanh,
    Elu,
    Gelu,
    Silu,
    Sigmoid,
}

impl Activation {
    pub const ALL: [Activation; 6] = [
        Activation::Relu,
        Activation::Tanh,
        Activation::Elu,
        Activation::Gelu,
        Activation::Silu,
        Activation::Sigmoid,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Activation::Relu => "relu",
            Activation::Tanh => "tanh",
            Activation::Elu => "elu",
            Activation::Gelu => "gelu",
            Activation::Silu => "silu",
            Activation::Sigmoid => "sigmoid",
        }
    }
}

/// What the config and the docs know of one layer.
#[derive(Debug)]
pub struct LayerInfo {
    pub name: &'static str,
    pub doc: &'static str,
    /// The first parameter may also be written as the layer's only argument.
    pub params: &'static [Param],
    /// Whether the layer holds a block of layers (`residual { ... }`).
    pub block: bool,
}

/// The most layers one network declares, counting those inside residual blocks: a bound on
/// what a config makes the checks and the builder walk.
pub const MAX_LAYERS: usize = 256;

/// The deepest nesting of residual blocks.
pub const MAX_DEPTH: usize = 8;

const WIDTH: Range = Range::Int {
    min: 1,
    max: 65_536,
};
const CHANNELS: Range = Range::Int { min: 1, max: 4096 };
const WINDOW: Range = Range::Int { min: 1, max: 64 };
const PADDING: Range = Range::Int { min: 0, max: 64 };
const KERNEL: Param = param("kernel", WINDOW, None, "Window side, in pixels.");
const STRIDE: Param = param(
    "stride",
    WINDOW,
    Some(Value::Int(1)),
    "Pixels between windows.",
);

const fn activation(name: &'static str, doc: &'static str) -> LayerInfo {
    LayerInfo {
        name,
        doc,
        params: &[],
        block: false,
    }
}

/// Every layer, in the order the docs list them.
pub const LAYERS: &[LayerInfo] = &[
    LayerInfo {
        name: "linear",
        doc: "A fully connected layer (with a bias) over the flattened input.",
        params: &[param("out", WIDTH, None, "Units (outputs).")],
        block: false,
    },
    LayerInfo {
        name: "conv",
        doc: "A 2-D convolution (with a bias) over a channels-first picture `[C, H, W]`.",
        params: &[
            param("out", CHANNELS, None, "Output channels."),
            KERNEL,
            STRIDE,
            param(
                "padding",
                PADDING,
                Some(Value::Int(0)),
                "Zeros around the picture.",
            ),
        ],
        block: false,
    },
    LayerInfo {
        name: "max-pool",
        doc: "The largest value of each window, per channel, over a picture `[C, H, W]`.",
        params: &[
            KERNEL,
            STRIDE,
            param(
                "padding",
                PADDING,
                Some(Value::Int(0)),
                "Pixels around the picture that no window's maximum takes (at most half the kernel).",
            ),
        ],
        block: false,
    },
    LayerInfo {
        name: "flatten",
        doc: "The input as one vector (a `linear` flattens by itself).",
        params: &[],
        block: false,
    },
    LayerInfo {
        name: "layer-norm",
        doc: "Each row normalised over all its values to mean 0 and variance 1 (epsilon 1e-5), then scaled and shifted element-wise by learned weights that start at 1 and 0.",
        params: &[],
        block: false,
    },
    activation("relu", "max(x, 0)."),
    activation("tanh", "tanh(x)."),
    activation("elu", "x above 0, exp(x) - 1 below."),
    activation(
        "gelu",
        "x Φ(x), Φ the standard normal's distribution function (exact, not tanh's approximation).",
    ),
    activation("silu", "x σ(x) (swish)."),
    activation("sigmoid", "σ(x) = 1 / (1 + exp(-x))."),
    LayerInfo {
        name: "scale-pixels",
        doc: "Raw 0..255 pixels to 0..1 (multiplies by 1/255); the built-in image torsos do it for pixel observations.",
        params: &[],
        block: false,
    },
    LayerInfo {
        name: "residual",
        doc: "`x + body(x)`, the body the block's layers, which must give back the shape they read: `residual { relu; conv 32 kernel=3 padding=1 }`.",
        params: &[],
        block: true,
    },
];

/// What [`LAYERS`] says of the layer called `name`.
pub fn info(name: &str) -> Option<&'static LayerInfo> {
    LAYERS.iter().find(|l| l.name == name)
}

/// How layers are written, for help texts and the reference.
pub mod written {
    pub const LIST: &str = "linear 64; tanh; linear 64; tanh";
    pub const SHORT: &str = "conv 32 kernel=8 stride=4";
    pub const CANONICAL: &str = "conv out=32 kernel=8 stride=4 padding=0";
    pub const JSON: &str = r#"{"kind": "conv", "out": 32, "kernel": 8, "stride": 4}"#;
    pub const RESIDUAL_JSON: &str = r#"{"kind": "residual", "layers": [{"kind": "relu"}]}"#;
}

impl Layer {
    /// The name a config writes it by.
    pub fn name(&self) -> &'static str {
        match self {
            Layer::Linear { .. } => "linear",
            Layer::Conv { .. } => "conv",
            Layer::MaxPool { .. } => "max-pool",
            Layer::Flatten => "flatten",
            Layer::LayerNorm => "layer-norm",
            Layer::Activation(a) => a.name(),
            Layer::ScalePixels => "scale-pixels",
            Layer::Residual { .. } => "residual",
        }
    }

    /// The parameters' values, in [`LAYERS`]' order.
    pub fn params(&self) -> Vec<Value> {
        let int = |v: u32| Value::Int(v.into());
        match *self {
            Layer::Linear { out } => vec![int(out)],
            Layer::Conv {
                out,
                kernel,
                stride,
                padding,
            } => vec![int(out), int(kernel), int(stride), int(padding)],
            Layer::MaxPool {
                kernel,
                stride,
                padding,
            } => vec![int(kernel), int(stride), int(padding)],
            Layer::Flatten
            | Layer::LayerNorm
            | Layer::Activation(_)
            | Layer::ScalePixels
            | Layer::Residual { .. } => Vec::new(),
        }
    }

    /// The layer called `name` with `values`, its parameters in [`LAYERS`]' order, and `body`
    /// its block's layers (a residual's); `None` for an unknown name or values not of its
    /// parameters' kinds (a config checks both first).
    pub fn from_params(name: &str, values: &[Value], body: Vec<Layer>) -> Option<Layer> {
        let small = |i: usize| match values.get(i) {
            Some(Value::Int(v)) => Some(u32::try_from(*v).unwrap_or(u32::MAX)),
            _ => None,
        };
        if let Some(a) = Activation::ALL.into_iter().find(|a| a.name() == name) {
            return Some(Layer::Activation(a));
        }
        Some(match name {
            "linear" => Layer::Linear { out: small(0)? },
            "conv" => Layer::Conv {
                out: small(0)?,
                kernel: small(1)?,
                stride: small(2)?,
                padding: small(3)?,
            },
            "max-pool" => Layer::MaxPool {
                kernel: small(0)?,
                stride: small(1)?,
                padding: small(2)?,
            },
            "flatten" => Layer::Flatten,
            "layer-norm" => Layer::LayerNorm,
            "scale-pixels" => Layer::ScalePixels,
            "residual" => Layer::Residual { body },
            _ => return None,
        })
    }

    /// The layer as a config writes it, every parameter named (`conv out=32 kernel=8 stride=4
    /// padding=0`), without its block.
    pub fn written(&self) -> String {
        let params = info(self.name()).map_or(&[][..], |info| info.params);
        let mut text = self.name().to_string();
        for (param, value) in params.iter().zip(self.params()) {
            text.push_str(&format!(" {}={value}", param.name));
        }
        text
    }

    /// The layers a residual block holds; none for any other layer.
    pub fn body(&self) -> &[Layer] {
        match self {
            Layer::Residual { body } => body,
            _ => &[],
        }
    }
}

/// The layers of `list` and of the blocks within, each before those its block holds (the order
/// a config writes them and [`Misfit::at`] counts them).
pub fn preorder(list: &[Layer]) -> Vec<&Layer> {
    let mut out = Vec::new();
    for layer in list {
        out.push(layer);
        out.extend(preorder(layer.body()));
    }
    out
}

/// Whether `list` convolves anywhere (inside residual blocks too): a network of pictures,
/// which defaults to one shared torso and whose products are large enough for more threads.
pub fn convolves(list: &[Layer]) -> bool {
    preorder(list)
        .iter()
        .any(|layer| matches!(layer, Layer::Conv { .. }))
}

/// A layer that cannot read what reaches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Misfit {
    /// The layer's place in [`preorder`].
    pub at: usize,
    /// The layer's name, `conv`.
    pub name: &'static str,
    /// What is wrong, e.g. "conv reads a picture [C, H, W]; it is given [64]".
    pub message: String,
}

/// The shape after each layer of `list` (in [`preorder`]: a residual's entry is its output, the
/// same as its input) for inputs of `shape` (without the batch), or the first layer that does
/// not fit.
pub fn shapes(list: &[Layer], shape: &[usize]) -> Result<Vec<Vec<usize>>, Misfit> {
    let mut out = Vec::new();
    walk(list, shape.to_vec(), &mut out)?;
    Ok(out)
}

/// The shape `list` gives for inputs of `shape`.
pub fn output_shape(list: &[Layer], shape: &[usize]) -> Result<Vec<usize>, Misfit> {
    Ok(shapes(list, shape)?.pop().unwrap_or_else(|| shape.to_vec()))
}

/// Appends each layer's output shape to `out`; returns the list's output shape.
fn walk(
    list: &[Layer],
    mut shape: Vec<usize>,
    out: &mut Vec<Vec<usize>>,
) -> Result<Vec<usize>, Misfit> {
    for layer in list {
        let at = out.len();
        let misfit = |message: String| Misfit {
            at,
            name: layer.name(),
            message,
        };
        shape = match layer {
            Layer::Residual { body } => {
                out.push(Vec::new());
                let given = walk(body, shape.clone(), out)?;
                if given != shape {
                    return Err(misfit(format!(
                        "a residual block's layers must give back the shape they read: it reads {} and gives {}",
                        shown(&shape),
                        shown(&given)
                    )));
                }
                out[at] = shape.clone();
                shape
            }
            layer => {
                let next = next_shape(layer, &shape).map_err(misfit)?;
                out.push(next.clone());
                next
            }
        };
    }
    Ok(shape)
}

/// The shape one layer (not a residual block) gives for inputs of `shape`.
fn next_shape(layer: &Layer, shape: &[usize]) -> Result<Vec<usize>, String> {
    let flat: usize = shape.iter().product();
    match *layer {
        Layer::Linear { out } => {
            if flat == 0 {
                return Err(format!(
                    "linear reads {}, which holds no values",
                    shown(shape)
                ));
            }
            Ok(vec![out as usize])
        }
        Layer::Flatten => Ok(vec![flat]),
        Layer::Conv {
            out,
            kernel,
            stride,
            padding,
        } => {
            let [_, h, w] = picture("conv", shape)?;
            let side = |size| window("conv", size, kernel, stride, padding);
            Ok(vec![out as usize, side(h)?, side(w)?])
        }
        Layer::MaxPool {
            kernel,
            stride,
            padding,
        } => {
            let [c, h, w] = picture("max-pool", shape)?;
            if 2 * padding > kernel {
                return Err(format!(
                    "max-pool's padding {padding} is more than half its kernel {kernel}"
                ));
            }
            let side = |size| window("max-pool", size, kernel, stride, padding);
            Ok(vec![c, side(h)?, side(w)?])
        }
        Layer::LayerNorm | Layer::Activation(_) | Layer::ScalePixels | Layer::Residual { .. } => {
            Ok(shape.to_vec())
        }
    }
}

/// `shape` as a picture `[C, H, W]`, or why a `layer` cannot read it.
fn picture(layer: &str, shape: &[usize]) -> Result<[usize; 3], String> {
    match *shape {
        [c, h, w] => Ok([c, h, w]),
        _ => Err(format!(
            "{layer} reads a picture [C, H, W]; it is given {}",
            shown(shape)
        )),
    }
}

/// A side's size after `kernel`-wide windows `stride` apart with `padding` around.
fn window(
    layer: &str,
    size: usize,
    kernel: u32,
    stride: u32,
    padding: u32,
) -> Result<usize, String> {
    let padded = size + 2 * padding as usize;
    if padded < kernel as usize {
        return Err(format!(
            "{layer}'s {kernel}x{kernel} window is larger than the {size} pixels it reads (padding {padding})"
        ));
    }
    Ok((padded - kernel as usize) / stride.max(1) as usize + 1)
}

/// `[64]`, `[32, 20, 20]`.
pub fn shown(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("[{}]", dims.join(", "))
}

/// `list`'s layers with the shape each gives on inputs of `shape`, one line each, a block's
/// layers indented below it: `network layers on [4]:`, then `1 linear out=64 -> [64]`...;
/// `None` if a layer does not fit.
pub fn table(list: &[Layer], shape: &[usize]) -> Option<Vec<String>> {
    let shapes = shapes(list, shape).ok()?;
    let mut lines = vec![format!("network layers on {}:", shown(shape))];
    let mut depths = Vec::new();
    depth_of(list, 0, &mut depths);
    for (i, (layer, depth)) in preorder(list).into_iter().zip(depths).enumerate() {
        lines.push(format!(
            "  {:>3} {}{} -> {}",
            i + 1,
            "  ".repeat(depth),
            layer.written(),
            shown(&shapes[i])
        ));
    }
    Some(lines)
}

/// Each layer's nesting depth, in [`preorder`].
fn depth_of(list: &[Layer], depth: usize, out: &mut Vec<usize>) {
    for layer in list {
        out.push(depth);
        depth_of(layer.body(), depth + 1, out);
    }
}

/// How many weights `list` holds for inputs of `shape` (biases and layer norms' included),
/// and the width of its flattened output; `None` if a layer does not fit.
pub fn parameters(list: &[Layer], shape: &[usize]) -> Option<(u64, u64)> {
    let mut count = 0u64;
    let mut input = shape.to_vec();
    for layer in list {
        count += match layer {
            Layer::Residual { body } => parameters(body, &input)?.0,
            Layer::Linear { out } => {
                let inputs: usize = input.iter().product();
                (inputs as u64 + 1) * u64::from(*out)
            }
            Layer::Conv { out, kernel, .. } => {
                let k = u64::from(*kernel);
                (input.first().copied()? as u64 * k * k + 1) * u64::from(*out)
            }
            Layer::LayerNorm => 2 * input.iter().product::<usize>() as u64,
            _ => 0,
        };
        input = next_shape_of(layer, &input)?;
    }
    Some((count, input.iter().product::<usize>() as u64))
}

fn next_shape_of(layer: &Layer, shape: &[usize]) -> Option<Vec<usize>> {
    match layer {
        Layer::Residual { .. } => Some(shape.to_vec()),
        layer => next_shape(layer, shape).ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv(out: u32, kernel: u32, stride: u32) -> Layer {
        Layer::Conv {
            out,
            kernel,
            stride,
            padding: 0,
        }
    }

    #[test]
    fn the_nature_cnn_as_layers_gives_its_3136_features_and_its_weights() {
        let nature = [
            Layer::ScalePixels,
            conv(32, 8, 4),
            Layer::Activation(Activation::Relu),
            conv(64, 4, 2),
            Layer::Activation(Activation::Relu),
            conv(64, 3, 1),
            Layer::Activation(Activation::Relu),
            Layer::Flatten,
            Layer::Linear { out: 512 },
            Layer::Activation(Activation::Relu),
        ];
        let shapes = shapes(&nature, &[4, 84, 84]).unwrap();
        assert_eq!(shapes[1], vec![32, 20, 20]);
        assert_eq!(shapes[3], vec![64, 9, 9]);
        assert_eq!(shapes[5], vec![64, 7, 7]);
        assert_eq!(shapes[7], vec![3136]);
        assert_eq!(shapes[9], vec![512]);
        // 32*(4*64+1) + 64*(32*16+1) + 64*(64*9+1) + 512*(3136+1)
        let weights = 8_224 + 32_832 + 36_928 + 1_606_144;
        assert_eq!(parameters(&nature, &[4, 84, 84]), Some((weights, 512)));
    }

    #[test]
    fn a_residual_block_keeps_its_shape_and_is_counted_before_its_body() {
        let list = [
            Layer::Linear { out: 8 },
            Layer::Residual {
                body: vec![Layer::LayerNorm, Layer::Linear { out: 8 }],
            },
            Layer::Activation(Activation::Tanh),
        ];
        let shapes = shapes(&list, &[4]).unwrap();
        assert_eq!(shapes, vec![vec![8], vec![8], vec![8], vec![8], vec![8]]);
        assert_eq!(preorder(&list).len(), 5);
        assert_eq!(preorder(&list)[2], &Layer::LayerNorm);
        assert_eq!(parameters(&list, &[4]), Some((5 * 8 + 16 + 9 * 8, 8)));
        let table = table(&list, &[4]).unwrap();
        assert_eq!(
            table,
            [
                "network layers on [4]:",
                "    1 linear out=8 -> [8]",
                "    2 residual -> [8]",
                "    3   layer-norm -> [8]",
                "    4   linear out=8 -> [8]",
                "    5 tanh -> [8]",
            ]
        );
    }

    #[test]
    fn a_misfit_names_its_layer_in_preorder_and_what_it_was_given() {
        let block_changes_width = [
            Layer::Linear { out: 8 },
            Layer::Residual {
                body: vec![Layer::Linear { out: 4 }],
            },
        ];
        let misfit = shapes(&block_changes_width, &[3]).unwrap_err();
        assert_eq!((misfit.at, misfit.name), (1, "residual"));
        assert!(
            misfit.message.contains("reads [8] and gives [4]"),
            "{}",
            misfit.message
        );

        let conv_on_a_vector = [Layer::Linear { out: 8 }, Layer::Flatten, conv(4, 3, 1)];
        let misfit = shapes(&conv_on_a_vector, &[3]).unwrap_err();
        assert_eq!((misfit.at, misfit.name), (2, "conv"));
        assert_eq!(
            misfit.message,
            "conv reads a picture [C, H, W]; it is given [8]"
        );

        // A window as wide as the picture fits, once.
        assert_eq!(
            output_shape(&[conv(4, 10, 1)], &[1, 10, 10]).unwrap(),
            vec![4, 1, 1]
        );
        let too_wide = [conv(4, 3, 1), conv(4, 9, 1)];
        let misfit = shapes(&too_wide, &[1, 10, 10]).unwrap_err();
        assert_eq!(misfit.at, 1);
        assert!(
            misfit.message.contains("larger than the 8 pixels"),
            "{}",
            misfit.message
        );
    }

    #[test]
    fn pooling_and_padding_give_the_sizes_torch_gives() {
        // IMPALA's stage on 64x64: conv 3x3 padding 1 keeps 64, max-pool 3 stride 2 padding 1
        // gives 32 (torch: floor((64 + 2 - 3) / 2) + 1).
        let stage = [
            Layer::Conv {
                out: 16,
                kernel: 3,
                stride: 1,
                padding: 1,
            },
            Layer::MaxPool {
                kernel: 3,
                stride: 2,
                padding: 1,
            },
        ];
        assert_eq!(
            output_shape(&stage, &[3, 64, 64]).unwrap(),
            vec![16, 32, 32]
        );
        let too_padded = [Layer::MaxPool {
            kernel: 2,
            stride: 2,
            padding: 2,
        }];
        assert!(shapes(&too_padded, &[1, 8, 8]).is_err());
        // torch's bound: padding at most half the kernel, half included.
        let pool = |kernel, padding| {
            [Layer::MaxPool {
                kernel,
                stride: 1,
                padding,
            }]
        };
        assert_eq!(
            output_shape(&pool(2, 1), &[1, 8, 8]).unwrap(),
            vec![1, 9, 9]
        );
        let refused = shapes(&pool(5, 3), &[1, 8, 8]).unwrap_err();
        assert_eq!(
            refused.message,
            "max-pool's padding 3 is more than half its kernel 5"
        );
    }

    #[test]
    fn the_table_finds_each_layer_by_its_name() {
        assert_eq!(info("conv").map(|l| l.params.len()), Some(4));
        assert_eq!(info("residual").map(|l| l.block), Some(true));
        assert!(info("dense").is_none());
    }

    #[test]
    fn every_layer_is_built_back_from_its_name_and_values() {
        for info in LAYERS {
            let values: Vec<Value> = info
                .params
                .iter()
                .map(|p| p.default.unwrap_or(Value::Int(3)))
                .collect();
            let layer = Layer::from_params(info.name, &values, Vec::new()).unwrap();
            assert_eq!(layer.name(), info.name);
            assert_eq!(layer.params(), values, "{}", info.name);
        }
        assert_eq!(Layer::from_params("dense", &[], Vec::new()), None);
    }
}
