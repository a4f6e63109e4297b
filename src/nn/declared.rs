//! A torso built from the layers an experiment declares (`network "layers" { layers { ... } }`,
//! [`tandem_config::Layer`]): its variables, in the order the list names them, and its forward
//! pass. Shapes follow tandem-spec's rule ([`tandem_config::layer::shapes`]), the one the config
//! checks a known observation by, so a list that does not fit is refused here in its words.

use anyhow::{Result, bail};
use tandem_config::Layer;
use tandem_config::layer::{self, Activation};
use tch::Tensor;
use tch::nn::{self, Module};

use super::init::{LayerInit, conv, linear};

/// One built layer. Variables live under the torso's path by the layer's place in its list
/// (`torso.0.weight`; a residual block's layers below its own place, `torso.2.1.weight`).
#[derive(Debug)]
pub(crate) enum Built {
    Linear(nn::Linear),
    Conv(nn::Conv2D),
    MaxPool {
        kernel: i64,
        stride: i64,
        padding: i64,
    },
    Flatten,
    LayerNorm(nn::LayerNorm),
    Activation(Activation),
    ScalePixels,
    Residual(Vec<Built>),
}

/// `layers` built under `path` for inputs of `shape` (without the batch), every linear and
/// convolution initialised as `init` says; with the width of the flattened output.
pub(crate) fn build(
    path: &nn::Path,
    layers: &[Layer],
    shape: &[i64],
    init: LayerInit,
) -> Result<(Vec<Built>, i64)> {
    let input: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
    if let Err(misfit) = layer::shapes(layers, &input) {
        bail!(
            "network layers: layer {} (`{}`, counting from 1 in the order written) does not fit: {}; \
             the network reads {}",
            misfit.at + 1,
            misfit.name,
            misfit.message,
            layer::shown(&input)
        );
    }
    let built = build_list(path, layers, input.clone(), init);
    let output = layer::output_shape(layers, &input).unwrap_or(input);
    Ok((built, output.iter().product::<usize>() as i64))
}

/// `layers` under `path`, each at its index, for inputs of `shape` (checked to fit).
fn build_list(
    path: &nn::Path,
    layers: &[Layer],
    mut shape: Vec<usize>,
    init: LayerInit,
) -> Vec<Built> {
    let mut built = Vec::with_capacity(layers.len());
    for (i, layer) in layers.iter().enumerate() {
        let here = path / i.to_string();
        built.push(build_one(&here, layer, &shape, init));
        if let Ok(next) = layer::output_shape(std::slice::from_ref(layer), &shape) {
            shape = next;
        }
    }
    built
}

fn build_one(path: &nn::Path, layer: &Layer, shape: &[usize], init: LayerInit) -> Built {
    let size = |v: u32| i64::from(v);
    match *layer {
        Layer::Linear { out } => {
            let inputs = shape.iter().product::<usize>() as i64;
            Built::Linear(linear(path.clone(), inputs, size(out), init))
        }
        Layer::Conv {
            out,
            kernel,
            stride,
            padding,
        } => Built::Conv(conv(
            path.clone(),
            shape[0] as i64,
            size(out),
            [size(kernel), size(stride), size(padding)],
            init,
        )),
        Layer::MaxPool {
            kernel,
            stride,
            padding,
        } => Built::MaxPool {
            kernel: size(kernel),
            stride: size(stride),
            padding: size(padding),
        },
        Layer::Flatten => Built::Flatten,
        Layer::LayerNorm => {
            let normalized: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
            Built::LayerNorm(nn::layer_norm(path, normalized, Default::default()))
        }
        Layer::Activation(a) => Built::Activation(a),
        Layer::ScalePixels => Built::ScalePixels,
        Layer::Residual { ref body } => {
            Built::Residual(build_list(path, body, shape.to_vec(), init))
        }
    }
}

/// The layers on `x` (`[B, ...shape]`), in order; the output flattened to `[B, features]`.
pub(crate) fn forward(layers: &[Built], x: &Tensor) -> Tensor {
    forward_list(layers, x).flatten(1, -1)
}

fn forward_list(layers: &[Built], x: &Tensor) -> Tensor {
    let mut x = x.shallow_clone();
    for layer in layers {
        x = forward_one(layer, &x);
    }
    x
}

fn forward_one(layer: &Built, x: &Tensor) -> Tensor {
    match layer {
        Built::Linear(linear) => linear.forward(&x.flatten(1, -1)),
        Built::Conv(conv) => conv.forward(x),
        Built::MaxPool {
            kernel,
            stride,
            padding,
        } => x.max_pool2d([*kernel; 2], [*stride; 2], [*padding; 2], [1, 1], false),
        Built::Flatten => x.flatten(1, -1),
        Built::LayerNorm(norm) => norm.forward(x),
        Built::Activation(a) => activate(*a, x),
        Built::ScalePixels => x * (1.0 / 255.0),
        Built::Residual(body) => x + forward_list(body, x),
    }
}

fn activate(activation: Activation, x: &Tensor) -> Tensor {
    match activation {
        Activation::Relu => x.relu(),
        Activation::Tanh => x.tanh(),
        Activation::Elu => x.elu(),
        Activation::Gelu => x.gelu("none"),
        Activation::Silu => x.silu(),
        Activation::Sigmoid => x.sigmoid(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::init::{Init, InitSpec};
    use tch::{Device, Kind, nn::VarStore};

    fn init() -> LayerInit {
        InitSpec {
            scheme: Init::Orthogonal,
            torso_gain: 2f64.sqrt(),
            policy_gain: 0.01,
            value_gain: 1.0,
        }
        .torso()
    }

    fn named(vs: &VarStore, name: &str) -> Tensor {
        vs.variables()[name].shallow_clone()
    }

    #[test]
    fn a_residual_mlp_computes_what_its_layers_say_with_variables_named_by_place() {
        let vs = VarStore::new(Device::Cpu);
        let layers = [
            Layer::Linear { out: 6 },
            Layer::Activation(Activation::Tanh),
            Layer::Residual {
                body: vec![
                    Layer::LayerNorm,
                    Layer::Linear { out: 6 },
                    Layer::Activation(Activation::Gelu),
                ],
            },
            Layer::Activation(Activation::Silu),
        ];
        let (built, width) = build(&(vs.root() / "torso"), &layers, &[2, 2], init()).unwrap();
        assert_eq!(width, 6);
        let mut names: Vec<String> = vs.variables().into_keys().collect();
        names.sort();
        assert_eq!(
            names,
            [
                "torso.0.bias",
                "torso.0.weight",
                "torso.2.0.bias",
                "torso.2.0.weight",
                "torso.2.1.bias",
                "torso.2.1.weight"
            ]
        );
        // The layer norm's weights start at 1 and 0; move them so that they count.
        tch::no_grad(|| {
            named(&vs, "torso.2.0.weight")
                .copy_(&Tensor::from_slice(&[0.5f32, 2., 1., 1., 3., 1.]));
            let _ = named(&vs, "torso.2.0.bias").fill_(0.25);
        });
        let obs = Tensor::randn([5, 2, 2], (Kind::Float, Device::Cpu));
        let (w0, b0) = (named(&vs, "torso.0.weight"), named(&vs, "torso.0.bias"));
        let h = obs.reshape([5, 4]).matmul(&w0.tr()).g_add(&b0).tanh();
        let mean = h.mean_dim(1, true, Kind::Float);
        let var = (&h - &mean).square().mean_dim(1, true, Kind::Float);
        let normed = (&h - &mean) / (var + 1e-5).sqrt() * named(&vs, "torso.2.0.weight")
            + named(&vs, "torso.2.0.bias");
        let inner =
            normed.matmul(&named(&vs, "torso.2.1.weight").tr()) + named(&vs, "torso.2.1.bias");
        let by_hand = (&h + inner.gelu("none")).silu();
        let out = forward(&built, &obs);
        assert_eq!(out.size(), [5, 6]);
        assert!(
            out.allclose(&by_hand, 1e-5, 1e-6, false),
            "{out} vs {by_hand}"
        );
    }

    #[test]
    fn pictures_pass_convolutions_and_pools_and_leave_flattened() {
        let vs = VarStore::new(Device::Cpu);
        let layers = [
            Layer::ScalePixels,
            Layer::Conv {
                out: 3,
                kernel: 3,
                stride: 1,
                padding: 1,
            },
            Layer::MaxPool {
                kernel: 2,
                stride: 2,
                padding: 0,
            },
            Layer::Activation(Activation::Elu),
        ];
        let (built, width) = build(&(vs.root() / "t"), &layers, &[2, 6, 6], init()).unwrap();
        assert_eq!(width, 3 * 3 * 3);
        let obs = Tensor::randint(256, [4, 2, 6, 6], (Kind::Float, Device::Cpu));
        let conv = (obs.shallow_clone() * (1.0 / 255.0)).conv2d(
            &named(&vs, "t.1.weight"),
            Some(named(&vs, "t.1.bias")),
            [1, 1],
            [1, 1],
            [1, 1],
            1,
        );
        let by_hand = conv
            .max_pool2d([2, 2], [2, 2], [0, 0], [1, 1], false)
            .elu()
            .flatten(1, -1);
        assert!(forward(&built, &obs).allclose(&by_hand, 1e-5, 1e-6, false));
    }

    #[test]
    fn a_list_that_does_not_fit_is_refused_naming_the_layer_by_its_place() {
        let vs = VarStore::new(Device::Cpu);
        let layers = [
            Layer::Linear { out: 4 },
            Layer::MaxPool {
                kernel: 2,
                stride: 2,
                padding: 0,
            },
        ];
        let err = build(&vs.root(), &layers, &[8], init())
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "network layers: layer 2 (`max-pool`, counting from 1 in the order written) does not fit: \
             max-pool reads a picture [C, H, W]; it is given [4]; the network reads [8]"
        );
    }
}
