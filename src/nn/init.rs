//! How layers start: [`InitSpec`] (orthogonal with a gain per role, tch's own default, or
//! PyTorch's), and
//! the constructors of the linear, convolutional and stacked layers that apply it.
//!
//! A layer's initialisation depends on its role: torso layers, the policy head, and the value
//! head (which also covers the Q heads of a [`super::QNetwork`]). Under
//! the Default and Torch schemes the roles all start alike and the gains play no part.

use tch::Tensor;
use tch::nn;

/// Which initialisation scheme the layers get: the config's `init` (its variants say what each
/// draws).
pub use tandem_config::Init;

/// How to initialise a network's layers. The gains only matter under
/// [`Init::Orthogonal`]: `torso_gain` for every torso layer (convolutions and fully
/// connected), `policy_gain` for the policy head, `value_gain` for the value head and for every
/// head of a Q-network (its plain head, or its dueling value and advantage heads).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InitSpec {
    pub scheme: Init,
    pub torso_gain: f64,
    pub policy_gain: f64,
    pub value_gain: f64,
}

impl InitSpec {
    pub(crate) fn torso(&self) -> LayerInit {
        self.with_gain(self.torso_gain)
    }

    pub(crate) fn policy(&self) -> LayerInit {
        self.with_gain(self.policy_gain)
    }

    pub(crate) fn value(&self) -> LayerInit {
        self.with_gain(self.value_gain)
    }

    /// A recurrent core's layers: gain 1, which keeps the recurrence's scale (CleanRL's
    /// `ppo_atari_lstm`).
    pub(crate) fn core(&self) -> LayerInit {
        self.with_gain(1.0)
    }

    fn with_gain(&self, gain: f64) -> LayerInit {
        LayerInit {
            scheme: self.scheme,
            gain,
        }
    }
}

/// One layer's initialisation: the scheme and its role's gain.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LayerInit {
    scheme: Init,
    gain: f64,
}

/// A fully connected layer `inputs -> outputs` (variables `weight` `[outputs, inputs]` and
/// `bias` `[outputs]` under `path`).
pub(crate) fn linear(path: nn::Path, inputs: i64, outputs: i64, init: LayerInit) -> nn::Linear {
    let config = match init.scheme {
        Init::Orthogonal => nn::LinearConfig {
            ws_init: nn::Init::Orthogonal { gain: init.gain },
            bs_init: Some(nn::Init::Const(0.0)),
            bias: true,
        },
        Init::Default => nn::LinearConfig::default(),
        Init::Torch => {
            let fan_in = torch_uniform(inputs);
            nn::LinearConfig {
                ws_init: fan_in,
                bs_init: Some(fan_in),
                bias: true,
            }
        }
    };
    nn::linear(path, inputs, outputs, config)
}

/// PyTorch's default draw for a layer of `fan_in` inputs: `U(±1/sqrt(fan_in))`.
fn torch_uniform(fan_in: i64) -> nn::Init {
    let bound = 1.0 / (fan_in as f64).sqrt();
    nn::Init::Uniform {
        lo: -bound,
        up: bound,
    }
}

/// A 2-d convolution with square `kernel`, `stride` and `padding`.
pub(crate) fn conv(
    path: nn::Path,
    inputs: i64,
    outputs: i64,
    [kernel, stride, padding]: [i64; 3],
    init: LayerInit,
) -> nn::Conv2D {
    let shape = nn::ConvConfig {
        stride,
        padding,
        ..Default::default()
    };
    match init.scheme {
        Init::Default => nn::conv2d(path, inputs, outputs, kernel, shape),
        Init::Torch => {
            let fan_in = torch_uniform(inputs * kernel * kernel);
            let torch = nn::ConvConfig {
                ws_init: fan_in,
                bs_init: fan_in,
                ..shape
            };
            nn::conv2d(path, inputs, outputs, kernel, torch)
        }
        Init::Orthogonal => {
            let zeros = nn::ConvConfig {
                ws_init: nn::Init::Const(0.0),
                bs_init: nn::Init::Const(0.0),
                ..shape
            };
            let mut conv = nn::conv2d(path, inputs, outputs, kernel, zeros);
            // tch's `Init::Orthogonal` returns the flattened `[out, in*k*k]` matrix for a 4-d
            // shape (the kernel loses its shape), so orthogonalise the flattened kernel here
            // and reshape it.
            let dims = conv.ws.size();
            let flat = nn::init(
                nn::Init::Orthogonal { gain: init.gain },
                &[dims[0], dims[1..].iter().product()],
                conv.ws.device(),
            );
            tch::no_grad(|| conv.ws.copy_(&flat.reshape(&dims)));
            conv
        }
    }
}

/// Initialises slice `index` of a stacked layer (weight `[stack, in, out]`, bias
/// `[stack, 1, out]`, both created zero) as a [`linear`] layer `in -> outputs` would be: its
/// usual `[outputs, in]` weight transposed into the slice's first `outputs` columns, its bias
/// into the bias slice's first `outputs` entries, drawn in [`linear`]'s order. The rest of the
/// slice is left as it is.
pub(crate) fn init_stacked_slice(
    weight: &Tensor,
    bias: &Tensor,
    index: i64,
    outputs: i64,
    init: LayerInit,
) {
    let inputs = weight.size()[1];
    let device = weight.device();
    tch::no_grad(|| {
        let usual = match init.scheme {
            Init::Orthogonal => nn::init(
                nn::Init::Orthogonal { gain: init.gain },
                &[outputs, inputs],
                device,
            ),
            Init::Default | Init::Torch => {
                // `nn::linear`'s bias (the same under both schemes), drawn before its weight.
                let usual_bias = nn::init(torch_uniform(inputs), &[outputs], device);
                bias.get(index)
                    .narrow(1, 0, outputs)
                    .copy_(&usual_bias.unsqueeze(0));
                let weight_init = match init.scheme {
                    Init::Torch => torch_uniform(inputs),
                    _ => nn::LinearConfig::default().ws_init,
                };
                nn::init(weight_init, &[outputs, inputs], device)
            }
        };
        weight.get(index).narrow(1, 0, outputs).copy_(&usual.tr());
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn largest_weight(scheme: Init) -> (f64, f64) {
        tch::manual_seed(0);
        let vs = nn::VarStore::new(tch::Device::Cpu);
        let init = LayerInit { scheme, gain: 1.0 };
        let layer = linear(vs.root() / "l", 64, 256, init);
        let bias = layer.bs.as_ref().unwrap().abs().max().double_value(&[]);
        (layer.ws.abs().max().double_value(&[]), bias)
    }

    #[test]
    fn torch_draws_weights_and_biases_within_one_over_root_fan_in_and_tch_draws_wider() {
        let bound = 1.0 / 64f64.sqrt();
        let (torch_w, torch_b) = largest_weight(Init::Torch);
        assert!(torch_w <= bound && torch_w > 0.99 * bound, "{torch_w}");
        assert!(torch_b <= bound, "{torch_b}");
        let (tch_w, _) = largest_weight(Init::Default);
        assert!(
            tch_w > 2.0 * bound,
            "tch's Kaiming draw reaches sqrt(6) / 8: {tch_w}"
        );
    }
}
