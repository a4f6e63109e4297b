//! Feature extractors ("torsos") declared by [`NetworkSpec`]: the layers between an observation
//! and the heads. Output sizes are computed from the observation shape when the torso is built,
//! so an observation that cannot fit the architecture is rejected with a message, not a panic.

use anyhow::{Context, Result, bail, ensure};
use tch::nn::{self, Module};
use tch::{Kind, Tensor};

use super::declared;
use super::init::{InitSpec, LayerInit, conv, init_stacked_slice, linear};

/// Nonlinearity between MLP layers: the config's `activation`.
pub use tandem_config::Activation;

/// The activation of a layer's fresh output, written over it: both activations' backward reads
/// their output, never their input, and a pre-activation nobody else holds needs no buffer of
/// its own. On SAC's 256-wide layers a new buffer per activation cost a cold write of 256 KiB
/// each (the profile in docs/performance.md, continuous control).
pub(crate) fn activate_in_place(activation: Activation, mut pre_activation: Tensor) -> Tensor {
    match activation {
        Activation::Tanh => pre_activation.tanh_(),
        Activation::Relu => pre_activation.relu_(),
    }
}

/// Which torso to build. The image torsos expect channels-first observations `C x H x W`.
#[derive(Debug, Clone, PartialEq)]
pub enum NetworkSpec {
    /// Fully connected layers of the given widths; observations of any shape are flattened.
    /// An empty `hidden` list makes a linear model (the heads read the flat observation).
    Mlp {
        hidden: Vec<i64>,
        activation: Activation,
    },
    /// The DQN paper's network (Mnih et al. 2015): conv 32 8x8 stride 4, conv 64 4x4 stride 2,
    /// conv 64 3x3 stride 1, a fully connected layer of `features` units (512 in the paper),
    /// ReLU after each.
    NatureCnn { features: i64 },
    /// The MinAtar paper's small network (Young & Tian 2019): a 3x3 stride-1 conv with
    /// `channels` outputs (16 in MinAtar's reference network), a fully connected layer of
    /// `features` units (128 there), ReLU after each; made for 10 x 10 x C observations.
    MinAtarCnn { channels: i64, features: i64 },
    /// The IMPALA paper's ResNet encoder (Espeholt et al. 2018): per entry of `channels`, a 3x3
    /// conv, a 3x3 stride-2 max pool and two residual blocks; then ReLU, a fully connected layer
    /// of `hidden` units and ReLU.
    ImpalaResNet { channels: Vec<i64>, hidden: i64 },
    /// The layers an experiment declares, in order ([`tandem_config::Layer`]); the output is
    /// flattened for the heads. They read the observation as the network receives it (a row
    /// for an image beside a vector) and scale nothing they are not told to.
    Layers(Vec<tandem_config::Layer>),
    /// An image torso (one of the above) over the image an observation holds beside a vector
    /// ([`tandem_spec::ImageEntry`]: the row's first `C * H * W` values, channels first), whose
    /// fully connected layer reads the vector's values after the image's flattened features.
    /// The image's pixels are scaled by 1/255 where `image` reads raw pixels.
    ImageBesideVector {
        image: Box<NetworkSpec>,
        /// `[C, H, W]`.
        shape: [i64; 3],
    },
    /// An image torso (one of the above, or an image beside a vector) whose layers compute on
    /// bfloat16 operands: each reads its input and its float32 weights cast to bfloat16, and
    /// the features return to float32 (`network.precision "bfloat16"`). Autograd carries the
    /// gradients back through the casts, so weights and gradients stay float32.
    Bfloat16(Box<NetworkSpec>),
}

impl NetworkSpec {
    /// CleanRL's classic-control MLP: two hidden layers of 64 with tanh.
    pub fn default_mlp() -> Self {
        NetworkSpec::Mlp {
            hidden: vec![64, 64],
            activation: Activation::Tanh,
        }
    }

    /// The IMPALA encoder as in the paper and CleanRL's procgen agent: channels 16, 32, 32 and
    /// 256 hidden units.
    pub fn default_impala() -> Self {
        NetworkSpec::ImpalaResNet {
            channels: vec![16, 32, 32],
            hidden: 256,
        }
    }

    /// Whether this torso reads images (and so expects `C x H x W`, or an image beside a vector).
    pub fn is_image(&self) -> bool {
        match self {
            NetworkSpec::Mlp { .. } | NetworkSpec::Layers(_) => false,
            NetworkSpec::Bfloat16(torso) => torso.is_image(),
            _ => true,
        }
    }

    /// Whether this torso reads raw 0..255 pixels, which it scales by 1/255: the Nature and
    /// IMPALA torsos; not the MinAtar net (its observations are already 0/1) nor MLPs.
    pub fn reads_raw_pixels(&self) -> bool {
        match self {
            NetworkSpec::NatureCnn { .. } | NetworkSpec::ImpalaResNet { .. } => true,
            NetworkSpec::ImageBesideVector { image, .. } => image.reads_raw_pixels(),
            NetworkSpec::Bfloat16(torso) => torso.reads_raw_pixels(),
            NetworkSpec::Mlp { .. } | NetworkSpec::MinAtarCnn { .. } | NetworkSpec::Layers(_) => {
                false
            }
        }
    }

    fn name(&self) -> &'static str {
        match self {
            NetworkSpec::Mlp { .. } => "mlp",
            NetworkSpec::NatureCnn { .. } => "nature-cnn",
            NetworkSpec::MinAtarCnn { .. } => "minatar-cnn",
            NetworkSpec::ImpalaResNet { .. } => "impala-resnet",
            NetworkSpec::Layers(_) => "layers",
            NetworkSpec::ImageBesideVector { image, .. } => image.name(),
            NetworkSpec::Bfloat16(torso) => torso.name(),
        }
    }
}

/// A plain MLP's layers, `(weight, bias)` each, and the activation after every layer.
pub(crate) type MlpParameters = (Vec<(Tensor, Tensor)>, Activation);

/// `(weight, bias)` of each linear layer, for the host passes (every layer has a bias).
pub(crate) fn linear_parameters(linears: &[nn::Linear]) -> Result<Vec<(Tensor, Tensor)>> {
    linears
        .iter()
        .map(|l| {
            let bias =
                l.bs.as_ref()
                    .context("host MLP: a linear layer without a bias")?;
            Ok((l.ws.shallow_clone(), bias.shallow_clone()))
        })
        .collect()
}

/// A built torso: maps `[B, ...obs_shape]` to `[B, output_dim]` features.
#[derive(Debug)]
pub(crate) struct Torso {
    layers: Layers,
    output_dim: i64,
    /// Where the image lies in a row that holds one beside a vector.
    beside: Option<ImageSplit>,
    /// The number format the layers compute in.
    compute: Compute,
}

/// The number format an image torso's layers compute in ([`NetworkSpec::Bfloat16`]).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Compute {
    /// As the variables are: float32.
    Float32,
    /// On bfloat16 copies of the input and of each layer's weights; features back in float32.
    Bfloat16,
}

impl Compute {
    /// `x` in this format.
    fn cast(self, x: &Tensor) -> Tensor {
        match self {
            Compute::Float32 => x.shallow_clone(),
            Compute::Bfloat16 => x.to_kind(Kind::BFloat16),
        }
    }

    /// `conv` on `x` (already in this format), with the layer's `[stride, padding]`.
    fn conv(self, conv: &nn::Conv2D, x: &Tensor, [stride, padding]: [i64; 2]) -> Tensor {
        match self {
            Compute::Float32 => conv.forward(x),
            Compute::Bfloat16 => x.conv2d(
                &self.cast(&conv.ws),
                conv.bs.as_ref().map(|b| self.cast(b)),
                [stride; 2],
                [padding; 2],
                [1, 1],
                1,
            ),
        }
    }

    /// `linear` on `x` (already in this format).
    fn linear(self, linear: &nn::Linear, x: &Tensor) -> Tensor {
        match self {
            Compute::Float32 => linear.forward(x),
            Compute::Bfloat16 => x.linear(
                &self.cast(&linear.ws),
                linear.bs.as_ref().map(|b| self.cast(b)),
            ),
        }
    }
}

/// How [`NetworkSpec::ImageBesideVector`] takes a row apart: the first `C * H * W` values are
/// the image, the rest the vector the fully connected layer also reads.
#[derive(Debug)]
struct ImageSplit {
    shape: [i64; 3],
    /// 1/255 for a torso that reads raw pixels, else 1.
    scale: f64,
}

impl ImageSplit {
    fn image_len(&self) -> i64 {
        self.shape.iter().product()
    }

    /// `[B, L]` rows to the `[B, C, H, W]` image (scaled) and the `[B, L - C*H*W]` vector.
    fn split(&self, rows: &Tensor) -> (Tensor, Tensor) {
        let image_len = self.image_len();
        let [c, h, w] = self.shape;
        let rows = rows.flatten(1, -1);
        let vector_len = rows.size()[1] - image_len;
        let image = rows.narrow(1, 0, image_len).reshape([-1, c, h, w]);
        let image = if self.scale == 1.0 {
            image
        } else {
            image * self.scale
        };
        (image, rows.narrow(1, image_len, vector_len))
    }
}

#[derive(Debug)]
enum Layers {
    Mlp {
        linears: Vec<nn::Linear>,
        activation: Activation,
    },
    /// Convolutions each followed by ReLU, then a ReLU fully connected layer (Nature, MinAtar).
    PlainConv {
        /// Each convolution with its `[stride, padding]`.
        convs: Vec<(nn::Conv2D, [i64; 2])>,
        fc: nn::Linear,
        /// Run the convolutions channels-last ([`channels_last`]): the Nature CNN's update at
        /// batch 256 took 134 ms instead of 172 on these machines (docs/performance.md); on
        /// MinAtar's 10 x 10 frames it measured no faster, so MinAtar keeps the default.
        channels_last: bool,
    },
    Impala {
        stages: Vec<ImpalaStage>,
        fc: nn::Linear,
    },
    /// The experiment's own layers.
    Declared(Vec<declared::Built>),
}

#[derive(Debug)]
struct ImpalaStage {
    conv: nn::Conv2D,
    residual: [ResidualBlock; 2],
}

#[derive(Debug)]
struct ResidualBlock {
    conv0: nn::Conv2D,
    conv1: nn::Conv2D,
}

/// `[stride, padding]` of the IMPALA encoder's 3x3 convolutions, which keep the size.
const SAME: [i64; 2] = [1, 1];

impl ResidualBlock {
    fn forward(&self, x: &Tensor, compute: Compute) -> Tensor {
        let hidden = compute.conv(&self.conv0, &x.relu(), SAME).relu();
        compute.conv(&self.conv1, &hidden, SAME) + x
    }
}

/// Spatial size after a convolution or pooling window, or an error naming the layer.
fn window_output(
    spec: &NetworkSpec,
    layer: &str,
    size: i64,
    kernel: i64,
    stride: i64,
    padding: i64,
) -> Result<i64> {
    let span = size + 2 * padding - kernel;
    if span < 0 {
        bail!(
            "network {}: the input to {layer} is {size} pixels wide, smaller than its {kernel}x{kernel} window \
             (padding {padding}); use larger observations or another network",
            spec.name()
        );
    }
    Ok(span / stride + 1)
}

/// `x` (N x C x H x W) laid out channels-last in memory: the same logical tensor, with strides
/// that make libtorch's oneDNN convolutions (and those after them, which keep the layout) take
/// their channels-last kernels.
fn channels_last(x: &Tensor) -> Tensor {
    x.permute([0, 2, 3, 1]).contiguous().permute([0, 3, 1, 2])
}

impl Torso {
    /// Builds the torso's variables under `path` for observations of shape `obs_shape`
    /// (without the batch dimension), every layer initialised as `init` says for torso layers.
    pub fn new(
        path: &nn::Path,
        spec: &NetworkSpec,
        init: &InitSpec,
        obs_shape: &[i64],
    ) -> Result<Torso> {
        check_obs_shape(spec.name(), obs_shape)?;
        match spec {
            NetworkSpec::ImageBesideVector { image, shape } => {
                Torso::beside_vector(path, image, *shape, init, obs_shape)
            }
            NetworkSpec::Bfloat16(torso) => {
                ensure!(
                    torso.is_image(),
                    "network {}: bfloat16 is for image torsos",
                    torso.name()
                );
                Ok(Torso {
                    compute: Compute::Bfloat16,
                    ..Torso::new(path, torso, init, obs_shape)?
                })
            }
            _ => Torso::plain(path, spec, init, obs_shape, 0),
        }
    }

    /// The torso of `spec` (not an image beside a vector); an image torso's fully connected
    /// layer reads `extra` more inputs after the image's features.
    fn plain(
        path: &nn::Path,
        spec: &NetworkSpec,
        init: &InitSpec,
        obs_shape: &[i64],
        extra: i64,
    ) -> Result<Torso> {
        let image = || -> Result<[i64; 3]> {
            match obs_shape {
                &[c, h, w] => Ok([c, h, w]),
                _ => bail!(
                    "network {}: this network needs channels-first image observations C x H x W, got shape {obs_shape:?}",
                    spec.name()
                ),
            }
        };
        let torso = init.torso();
        match spec {
            NetworkSpec::Mlp { hidden, activation } => {
                check_hidden(hidden)?;
                let mut inputs: i64 = obs_shape.iter().product();
                let mut linears = Vec::with_capacity(hidden.len());
                for (i, &width) in hidden.iter().enumerate() {
                    linears.push(linear(path / format!("fc{i}"), inputs, width, torso));
                    inputs = width;
                }
                Ok(Torso {
                    layers: Layers::Mlp {
                        linears,
                        activation: *activation,
                    },
                    output_dim: inputs,
                    beside: None,
                    compute: Compute::Float32,
                })
            }
            NetworkSpec::NatureCnn { features } => {
                check_positive(spec, "features", *features)?;
                let convs = [[32, 8, 4], [64, 4, 2], [64, 3, 1]];
                plain_conv(path, spec, image()?, &convs, (*features, extra), torso)
            }
            NetworkSpec::MinAtarCnn { channels, features } => {
                check_positive(spec, "channels", *channels)?;
                check_positive(spec, "features", *features)?;
                let convs = [[*channels, 3, 1]];
                plain_conv(path, spec, image()?, &convs, (*features, extra), torso)
            }
            NetworkSpec::ImpalaResNet { channels, hidden } => {
                impala(path, spec, image()?, channels, (*hidden, extra), torso)
            }
            NetworkSpec::Layers(layers) => {
                let (built, output_dim) = declared::build(path, layers, obs_shape, torso)?;
                Ok(Torso {
                    layers: Layers::Declared(built),
                    output_dim,
                    beside: None,
                    compute: Compute::Float32,
                })
            }
            NetworkSpec::ImageBesideVector { .. } => bail!(
                "network {}: an image beside a vector holds one image torso, not another",
                spec.name()
            ),
            NetworkSpec::Bfloat16(_) => bail!(
                "network {}: bfloat16 applies to the whole torso, not to the image beside a vector",
                spec.name()
            ),
        }
    }

    /// [`NetworkSpec::ImageBesideVector`]: `image`'s torso over the row's first `C * H * W`
    /// values, its fully connected layer also reading the rest of the row.
    fn beside_vector(
        path: &nn::Path,
        image: &NetworkSpec,
        shape: [i64; 3],
        init: &InitSpec,
        obs_shape: &[i64],
    ) -> Result<Torso> {
        let split = ImageSplit {
            shape,
            scale: if image.reads_raw_pixels() {
                1.0 / 255.0
            } else {
                1.0
            },
        };
        let row: i64 = obs_shape.iter().product();
        let vector = row - split.image_len();
        ensure!(
            image.is_image() && vector >= 0,
            "network {}: observation rows of {row} values cannot hold a {shape:?} image",
            image.name()
        );
        let torso = Torso::plain(path, image, init, &shape, vector)?;
        Ok(Torso {
            beside: Some(split),
            ..torso
        })
    }

    /// Width of the feature vector this torso produces.
    pub fn output_dim(&self) -> i64 {
        self.output_dim
    }

    /// A plain MLP torso's layers, `(weight, bias)` each, and its activation (which follows
    /// every layer), for the host passes; `None` for any other torso.
    pub(crate) fn mlp_parameters(&self) -> Result<Option<MlpParameters>> {
        match (&self.layers, &self.beside) {
            (
                Layers::Mlp {
                    linears,
                    activation,
                },
                None,
            ) => Ok(Some((linear_parameters(linears)?, *activation))),
            _ => Ok(None),
        }
    }

    /// `[B, ...obs_shape]` (already float and scaled, but for an image beside a vector, which
    /// this torso scales) to `[B, output_dim]`. Shapes are checked by the caller
    /// ([`super::ActorCritic`], [`super::QNetwork`]).
    pub fn forward(&self, obs: &Tensor) -> Tensor {
        let features = match &self.beside {
            None => self.layers.forward(obs, None, self.compute),
            Some(split) => {
                let (image, vector) = split.split(obs);
                self.layers.forward(&image, Some(&vector), self.compute)
            }
        };
        features.to_kind(Kind::Float)
    }
}

impl Layers {
    /// The layers on `obs`, computing in `compute`'s format; an image torso's fully connected
    /// layer reads `vector` after the image's flattened features.
    fn forward(&self, obs: &Tensor, vector: Option<&Tensor>, compute: Compute) -> Tensor {
        let joined = |features: Tensor| match vector {
            Some(v) => Tensor::cat(&[features, compute.cast(v)], 1),
            None => features,
        };
        match self {
            Layers::Mlp {
                linears,
                activation,
            } => {
                let mut x = obs.flatten(1, -1);
                for linear in linears {
                    x = activate_in_place(*activation, linear.forward(&x));
                }
                x
            }
            Layers::PlainConv {
                convs,
                fc,
                channels_last: last,
            } => {
                let mut x = compute.cast(obs);
                if *last {
                    x = channels_last(&x);
                }
                for (conv, geometry) in convs {
                    x = compute.conv(conv, &x, *geometry).relu();
                }
                compute.linear(fc, &joined(x.flatten(1, -1))).relu()
            }
            Layers::Impala { stages, fc } => {
                let mut x = compute.cast(obs);
                for stage in stages {
                    x = compute.conv(&stage.conv, &x, SAME);
                    x = x.max_pool2d([3, 3], [2, 2], [1, 1], [1, 1], false);
                    for block in &stage.residual {
                        x = block.forward(&x, compute);
                    }
                }
                compute.linear(fc, &joined(x.flatten(1, -1).relu())).relu()
            }
            Layers::Declared(layers) => declared::forward(layers, obs),
        }
    }
}

/// Convolutions `[out_channels, kernel, stride]` (no padding), each followed by ReLU, then a
/// fully connected layer of `features` units and ReLU: the Nature and MinAtar torsos. The fully
/// connected layer reads `extra` more inputs after the convolutions' features.
fn plain_conv(
    path: &nn::Path,
    spec: &NetworkSpec,
    [c, mut h, mut w]: [i64; 3],
    shapes: &[[i64; 3]],
    (features, extra): (i64, i64),
    init: LayerInit,
) -> Result<Torso> {
    let mut convs = Vec::with_capacity(shapes.len());
    let mut channels = c;
    for (i, &[out, kernel, stride]) in shapes.iter().enumerate() {
        let layer = format!("conv{i}");
        h = window_output(spec, &layer, h, kernel, stride, 0)?;
        w = window_output(spec, &layer, w, kernel, stride, 0)?;
        convs.push((
            conv(path / layer, channels, out, [kernel, stride, 0], init),
            [stride, 0],
        ));
        channels = out;
    }
    let fc = linear(path / "fc", channels * h * w + extra, features, init);
    Ok(Torso {
        layers: Layers::PlainConv {
            convs,
            fc,
            channels_last: matches!(spec, NetworkSpec::NatureCnn { .. }),
        },
        output_dim: features,
        beside: None,
        compute: Compute::Float32,
    })
}

/// The IMPALA encoder: per entry of `channels` a conv, a max pool and two residual blocks; its
/// fully connected layer reads `extra` more inputs after the stages' features.
fn impala(
    path: &nn::Path,
    spec: &NetworkSpec,
    [c, mut h, mut w]: [i64; 3],
    channels: &[i64],
    (hidden, extra): (i64, i64),
    init: LayerInit,
) -> Result<Torso> {
    ensure!(
        !channels.is_empty() && channels.iter().all(|&c| c > 0),
        "network impala-resnet: channels must be a non-empty list of positive sizes, got {channels:?}"
    );
    check_positive(spec, "hidden", hidden)?;
    let same =
        |path: nn::Path, inputs: i64, outputs: i64| conv(path, inputs, outputs, [3, 1, 1], init);
    let mut stages = Vec::new();
    let mut inputs = c;
    for (i, &out) in channels.iter().enumerate() {
        let stage = path / format!("stage{i}");
        let conv = same(&stage / "conv", inputs, out);
        let pool = format!("stage{i} max pool");
        h = window_output(spec, &pool, h, 3, 2, 1)?;
        w = window_output(spec, &pool, w, 3, 2, 1)?;
        let block = |b: usize| ResidualBlock {
            conv0: same(&stage / format!("res{b}") / "conv0", out, out),
            conv1: same(&stage / format!("res{b}") / "conv1", out, out),
        };
        let residual = [block(0), block(1)];
        stages.push(ImpalaStage { conv, residual });
        inputs = out;
    }
    let fc = linear(path / "fc", inputs * h * w + extra, hidden, init);
    Ok(Torso {
        layers: Layers::Impala { stages, fc },
        output_dim: hidden,
        beside: None,
        compute: Compute::Float32,
    })
}

fn check_positive(spec: &NetworkSpec, what: &str, value: i64) -> Result<()> {
    ensure!(
        value > 0,
        "network {}: {what} must be positive, got {value}",
        spec.name()
    );
    Ok(())
}

fn check_obs_shape(network: &str, obs_shape: &[i64]) -> Result<()> {
    ensure!(
        !obs_shape.is_empty() && obs_shape.iter().all(|&d| d > 0),
        "network {network}: observation shape {obs_shape:?} must have at least one dimension, all positive"
    );
    Ok(())
}

fn check_hidden(hidden: &[i64]) -> Result<()> {
    if let Some(bad) = hidden.iter().find(|&&h| h <= 0) {
        bail!("network mlp: hidden layer sizes must be positive, got {bad} in {hidden:?}");
    }
    Ok(())
}

/// Two MLP torsos of one shape reading the same input, computed together: the actor's and the
/// critic's torso of a "separate" MLP actor-critic. Layer i of both lives in one weight
/// `fc{i}.weight` of shape `[2, in, out]` (index 0 the actor's, 1 the critic's; each slice is
/// the transpose of the usual `[out, in]` weight, initialised the same way) and
/// one bias `fc{i}.bias` of shape `[2, 1, out]`. A layer is then one batched matrix multiply
/// (`baddbmm`) and one activation instead of two linear layers, two transposes and two
/// activations: on classic-control networks libtorch's per-operation overhead, not the
/// arithmetic, is most of an update, and this halves the operations of both torsos (about 9% of
/// a CartPole PPO step; docs/performance.md). The actor-critic stacks its two heads the same way
/// on top (`StackedHeads` in `actor_critic.rs`).
#[derive(Debug)]
pub(crate) struct TwinMlp {
    /// `(weight [2, in, out], bias [2, 1, out])` per hidden layer.
    layers: Vec<(Tensor, Tensor)>,
    activation: Activation,
    output_dim: i64,
}

impl TwinMlp {
    pub fn new(
        path: &nn::Path,
        hidden: &[i64],
        activation: Activation,
        init: &InitSpec,
        obs_shape: &[i64],
    ) -> Result<TwinMlp> {
        check_obs_shape("mlp", obs_shape)?;
        check_hidden(hidden)?;
        let mut inputs: i64 = obs_shape.iter().product();
        let mut layers = Vec::with_capacity(hidden.len());
        for (i, &width) in hidden.iter().enumerate() {
            let layer = path / format!("fc{i}");
            let weight = layer.zeros("weight", &[2, inputs, width]);
            let bias = layer.zeros("bias", &[2, 1, width]);
            for torso in 0..2 {
                init_stacked_slice(&weight, &bias, torso, width, init.torso());
            }
            layers.push((weight, bias));
            inputs = width;
        }
        Ok(TwinMlp {
            layers,
            activation,
            output_dim: inputs,
        })
    }

    /// Width of each torso's feature vector.
    pub fn output_dim(&self) -> i64 {
        self.output_dim
    }

    /// `(weight [2, in, out], bias [2, 1, out])` per hidden layer, and their activation.
    pub fn layers(&self) -> (&[(Tensor, Tensor)], Activation) {
        (&self.layers, self.activation)
    }

    /// `[B, ...obs_shape]` (already float) to both torsos' features, stacked: `[2, B, output_dim]`,
    /// index 0 the actor's.
    pub fn forward(&self, obs: &Tensor) -> Tensor {
        let x = obs.flatten(1, -1);
        // The same rows for both torsos: a broadcast view, nothing is copied. Sized by -1, so a
        // traced pass (`tandem export`) takes any batch.
        let mut h = x.unsqueeze(0).expand([2, -1, -1], false);
        for (weight, bias) in &self.layers {
            h = activate_in_place(self.activation, bias.baddbmm(&h, weight, 1.0, 1.0));
        }
        h
    }
}

/// Converts observations to float and applies the 1/255 pixel scaling when asked.
pub(crate) fn prepare_observations(obs: &Tensor, scale_pixels: bool) -> Tensor {
    let x = if obs.kind() == Kind::Float {
        obs.shallow_clone()
    } else {
        obs.to_kind(Kind::Float)
    };
    if scale_pixels { x * (1.0 / 255.0) } else { x }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::init::Init;

    /// Orthogonal initialisation with the Atari gains.
    fn orthogonal() -> InitSpec {
        InitSpec {
            scheme: Init::Orthogonal,
            torso_gain: 2f64.sqrt(),
            policy_gain: 0.01,
            value_gain: 1.0,
        }
    }

    /// The layers of `torso` applied to `obs` as laid out, without [`channels_last`].
    fn in_given_layout(torso: &Torso, obs: &Tensor) -> Tensor {
        let Layers::PlainConv { convs, fc, .. } = &torso.layers else {
            panic!("a plain conv torso")
        };
        let mut x = obs.shallow_clone();
        for (conv, _) in convs {
            x = conv.forward(&x).relu();
        }
        fc.forward(&x.flatten(1, -1)).relu()
    }

    /// The joined torso is the image torso on the row's first values (scaled, as its pixels
    /// are), its dense layer reading the rest of the row after the convolutions' features.
    #[test]
    fn an_image_beside_a_vector_joins_the_image_features_before_the_dense_layer() {
        tch::manual_seed(5);
        let vs = nn::VarStore::new(tch::Device::Cpu);
        let init = orthogonal();
        let spec = NetworkSpec::ImageBesideVector {
            image: Box::new(NetworkSpec::NatureCnn { features: 16 }),
            shape: [2, 36, 40],
        };
        let torso = Torso::new(&vs.root(), &spec, &init, &[2 * 36 * 40 + 3]).unwrap();
        let f = (Kind::Float, tch::Device::Cpu);
        let image = Tensor::rand([4, 2, 36, 40], f) * 255.0;
        let vector = Tensor::rand([4, 3], f);
        let rows = |v: &Tensor| Tensor::cat(&[image.flatten(1, -1), v.shallow_clone()], 1);
        let joined = torso.forward(&rows(&vector));
        let by_hand = {
            let Layers::PlainConv { convs, fc, .. } = &torso.layers else {
                panic!("a plain conv torso")
            };
            let mut x = &image / 255.0;
            for (conv, _) in convs {
                x = conv.forward(&x).relu();
            }
            fc.forward(&Tensor::cat(&[x.flatten(1, -1), vector.shallow_clone()], 1))
                .relu()
        };
        assert_eq!(joined.size(), [4, 16]);
        assert!(joined.allclose(&by_hand, 1e-4, 1e-5, false));
        let moved = torso.forward(&rows(&(&vector + 1.0)));
        assert!(
            !moved.allclose(&joined, 1e-4, 1e-5, false),
            "the vector is read"
        );
        let short = Torso::new(&vs.root(), &spec, &init, &[100]).unwrap_err();
        assert_eq!(
            short.to_string(),
            "network nature-cnn: observation rows of 100 values cannot hold a [2, 36, 40] image"
        );
    }

    /// A bfloat16 torso computes the float32 torso's features and gradients to bfloat16's
    /// tolerance (8 significant bits), returns float32 features, and keeps float32 weights and
    /// gradients; an IMPALA torso beside a vector too.
    #[test]
    fn bfloat16_torsos_match_float32_to_bfloat16_tolerance() {
        let f = (Kind::Float, tch::Device::Cpu);
        let cases = [
            (NetworkSpec::NatureCnn { features: 64 }, vec![4, 84, 84]),
            (
                NetworkSpec::ImageBesideVector {
                    image: Box::new(NetworkSpec::default_impala()),
                    shape: [3, 16, 16],
                },
                vec![3 * 16 * 16 + 5],
            ),
        ];
        for (spec, shape) in cases {
            tch::manual_seed(11);
            let vs = nn::VarStore::new(tch::Device::Cpu);
            let mut torso = Torso::new(&vs.root(), &spec, &orthogonal(), &shape).unwrap();
            let grads = |torso: &Torso, obs: &Tensor| -> (Tensor, Vec<Tensor>) {
                let mut vars = vs.trainable_variables();
                for v in &mut vars {
                    v.zero_grad();
                }
                let out = torso.forward(obs);
                (out.square().mean(Kind::Float)).backward();
                (out.detach(), vars.iter().map(|v| v.grad().copy()).collect())
            };
            let batch: Vec<i64> = std::iter::once(8).chain(shape.iter().copied()).collect();
            let obs = Tensor::rand(batch.as_slice(), f);
            let (exact, exact_grads) = grads(&torso, &obs);
            torso.compute = Compute::Bfloat16;
            let (approx, approx_grads) = grads(&torso, &obs);
            assert_eq!(approx.kind(), Kind::Float);
            let scale = exact.abs().max().double_value(&[]);
            let error = (&approx - &exact).abs().max().double_value(&[]);
            assert!(error < 0.03 * scale, "features off by {error} of {scale}");
            assert!(error > 0.0, "the bfloat16 path computed in float32");
            // Each tensor's error against its own largest gradient, or a thousandth of the
            // largest of all where a tensor's gradients are all near zero.
            let largest = exact_grads
                .iter()
                .map(|e| e.abs().max().double_value(&[]))
                .fold(0.0, f64::max);
            for (a, e) in approx_grads.iter().zip(&exact_grads) {
                assert_eq!(a.kind(), Kind::Float);
                let scale = e.abs().max().double_value(&[]).max(1e-3 * largest);
                let error = (a - e).abs().max().double_value(&[]);
                assert!(error <= 0.08 * scale, "gradient off by {error} of {scale}");
            }
        }
        let mlp = NetworkSpec::Bfloat16(Box::new(NetworkSpec::default_mlp()));
        let vs = nn::VarStore::new(tch::Device::Cpu);
        let refused = Torso::new(&vs.root(), &mlp, &orthogonal(), &[4]).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "network mlp: bfloat16 is for image torsos"
        );
    }

    /// The channels-last path computes the default layout's features and gradients, to float
    /// tolerance (the kernels sum in another order).
    #[test]
    fn channels_last_convolutions_match_the_default_layout() {
        tch::manual_seed(3);
        let vs = nn::VarStore::new(tch::Device::Cpu);
        let init = orthogonal();
        let spec = NetworkSpec::NatureCnn { features: 512 };
        let torso = Torso::new(&vs.root(), &spec, &init, &[4, 84, 84]).unwrap();
        let obs = Tensor::rand([16, 4, 84, 84], (Kind::Float, tch::Device::Cpu));
        let grads = |out: Tensor| -> Vec<Tensor> {
            let mut vars = vs.trainable_variables();
            for v in &mut vars {
                v.zero_grad();
            }
            (out.square().mean(Kind::Float)).backward();
            vars.iter().map(|v| v.grad().copy()).collect()
        };
        assert!(matches!(
            torso.layers,
            Layers::PlainConv {
                channels_last: true,
                ..
            }
        ));
        let fast = torso.forward(&obs);
        let plain = in_given_layout(&torso, &obs);
        let diff = (&fast - &plain).abs().max().double_value(&[]);
        let scale = plain.abs().max().double_value(&[]);
        assert!(
            fast.allclose(&plain, 1e-4, 1e-5, false),
            "max diff {diff} of {scale}"
        );
        assert_ne!(
            channels_last(&obs).stride(),
            obs.stride(),
            "the layout changed"
        );
        for (a, b) in grads(fast).iter().zip(grads(plain).iter()) {
            assert!(a.allclose(b, 1e-3, 1e-6, false), "gradients differ");
        }
    }
}
