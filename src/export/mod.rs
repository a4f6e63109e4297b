//! `tandem export`: a checkpoint's policy as a TorchScript module that Python (`torch.jit.load`)
//! or C++ runs without tandem. The module is traced from the policy's own greedy pass
//! ([`Policy::outputs`], the operations `tandem play --greedy` acts by), with the observation
//! normaliser the checkpoint holds in front of it, so it needs nothing but observations as the
//! environment gives them after tandem's other wrappers.
//!
//! Methods of the exported module (`B` observations a batch, any `B`), each returning one
//! tensor (TorchScript exports no method of several outputs from a trace):
//! - `forward(obs)` the actions tandem sends the environment (int64 indices, or a box's values);
//! - the action distribution's parameters, one method each ([`Outputs::parameters`]): `logits`;
//!   `mean` and `log_std`; a Q-learner's `q_values`; none for TD3's deterministic actor;
//! - `value(obs)` the value estimate ([`Outputs::value`]).
//!
//! A recurrent policy's methods take the state `[B, width]` after the observations
//! (`initial_state(obs)` gives zeros, which is also what an episode's first step takes), and
//! `next_state(obs, state)` gives the state after the step.
//!
//! `--format onnx` (or an output named `*.onnx`) writes the same module as one ONNX graph
//! instead, by torch's exporter in a Python the user names ([`onnx`], `src/export/onnx.py`),
//! checked by onnxruntime against the module: a policy that leaves without any torch.
//!
//! Tracing records the operations the policy ran on example observations; tch can trace only
//! one method into a new module, so each further method is traced on a scratch module of the
//! same class and its graph attached to the exported one ([`Traced::trace`]). Every export is
//! loaded back and run against the policy before it is called done.

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail, ensure};
use tch::{CModule, IValue, Kind, Tensor};

use crate::play::CheckpointChoice;
use crate::policy::{Outputs, Policy};
use tandem_config::{Experiment, Wrapper};
use tandem_env::norm::NormKind;

#[derive(clap::Args, Debug, Clone)]
pub struct ExportArgs {
    #[command(flatten)]
    pub checkpoint: CheckpointChoice,
    /// The module's format: TorchScript, or ONNX (one graph, run by onnxruntime without
    /// torch). Default: ONNX for an output named `*.onnx`, else TorchScript.
    #[arg(long, value_parser = ["torchscript", "onnx"])]
    pub format: Option<String>,
    /// For `--format onnx`: a Python with torch (2.13 or newer), onnx and onnxruntime, which
    /// converts the traced module and checks the graph.
    #[arg(long, value_name = "PYTHON", default_value = "python3")]
    pub python: PathBuf,
    /// Where to write the module.
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Which policy of a run of several to export (required there; a run of one has none to
    /// pick).
    #[arg(long, value_name = "POLICY")]
    pub policy: Option<String>,
}

/// The class name of the exported module (`__torch__.TandemPolicy`).
const CLASS: &str = "TandemPolicy";

/// Observations an export is traced on, and the different count it is checked on: a batch
/// size baked into the trace fails the check.
const TRACE_BATCH: i64 = 2;
const CHECK_BATCH: i64 = 7;

impl ExportArgs {
    fn writes_onnx(&self) -> bool {
        match self.format.as_deref() {
            Some(format) => format == "onnx",
            None => self.output.extension().is_some_and(|e| e == "onnx"),
        }
    }
}

pub fn run(args: &ExportArgs) -> Result<ExitCode> {
    let summary = export(args)?;
    println!("{summary}");
    Ok(ExitCode::SUCCESS)
}

/// Writes the module and returns what it holds, in words.
pub fn export(args: &ExportArgs) -> Result<String> {
    let (ckpt, experiment, path) = args.checkpoint.open("export")?;
    let normalizer = Normalizer::of(&experiment)?;
    let bridge = tandem_env::BridgeOptions {
        log_prefix: String::new(),
        render: false,
    };
    let mut env = tandem_env::VecEnv::with_bridge(
        &crate::train::envs::env_spec(&experiment),
        &[0],
        1,
        &bridge,
    )
    .context("cannot build an environment to read the policy's spaces from")?;
    let (policy, obs_shape) = match args.policy.as_deref() {
        None => crate::play::restored_policy(&experiment, &ckpt, &mut env)?,
        Some(name) => crate::play::restored_one_of_several(&experiment, &ckpt, &mut env, name)?,
    };
    let normalizer = match normalizer {
        Some(clip) => {
            let stats = env.normalizer_stats_of(NormKind::Observation);
            let [stats] = stats.as_slice() else {
                bail!(
                    "the environment holds {} observation normalisers",
                    stats.len()
                );
            };
            let (mean, inv_std) =
                stats.f32_mean_and_inv_std(tandem_env::wrappers::NORMALIZER_EPSILON);
            Some(Normalizer {
                mean: Tensor::from_slice(&mean),
                inv_std: Tensor::from_slice(&inv_std),
                clip,
            })
        }
        None => None,
    };
    for (_, variable) in policy.targets() {
        // Tracing refuses to record a tensor that needs gradients as a constant.
        let _ = variable.set_requires_grad(false);
    }
    let exported = Exported {
        policy,
        normalizer,
        obs_shape,
    };
    let module = exported.trace()?;
    if !args.writes_onnx() {
        save(&module, &args.output)?;
        exported.check(&args.output)?;
        return Ok(format!(
            "wrote {} (TorchScript, from {}): {}",
            args.output.display(),
            path.display(),
            exported.describe()?
        ));
    }
    // The ONNX graph is converted from the checked TorchScript module, kept meanwhile beside
    // the output under a name of its own.
    let traced = onnx::scratch_path(&args.output, "torchscript");
    save(&module, &traced)?;
    let converted = exported
        .check(&traced)
        .and_then(|()| onnx::convert(&exported, &traced, args));
    let _ = std::fs::remove_file(&traced);
    Ok(format!(
        "wrote {} ({}, from {}): {}",
        args.output.display(),
        converted?,
        path.display(),
        exported.describe_onnx()?
    ))
}

/// An observation normaliser's statistics as the environment applies them.
struct Normalizer {
    mean: Tensor,
    inv_std: Tensor,
    clip: f64,
}

impl Normalizer {
    /// The clip of the chain's `normalize-obs`, when it has one that an exported module can
    /// apply to the observations it is given: the last wrapper to change them.
    fn of(experiment: &Experiment) -> Result<Option<f64>> {
        let chain = &experiment.env.wrappers;
        let Some(at) = chain
            .iter()
            .position(|w| matches!(w, Wrapper::NormalizeObs { .. }))
        else {
            return Ok(None);
        };
        if let Some(later) = chain[at + 1..].iter().find(|w| w.changes_observation()) {
            crate::usage::mistake!(
                "cannot export: `{}` changes the observations after `normalize-obs`, so an \
                 exported module given the environment's observations cannot normalise them as \
                 training did; put `normalize-obs` last among the wrappers that change \
                 observations",
                later.name()
            );
        }
        let Wrapper::NormalizeObs { clip } = chain[at] else {
            unreachable!("found as normalize-obs above")
        };
        Ok(Some(clip))
    }

    /// `clamp((x - mean) * inv_std, -clip, clip)` in f32, the wrapper's operations.
    fn apply(&self, obs: &Tensor) -> Tensor {
        ((obs - &self.mean) * &self.inv_std).clamp(-self.clip, self.clip)
    }
}

/// A restored policy with what its exported module puts in front of it.
struct Exported {
    policy: Policy,
    normalizer: Option<Normalizer>,
    obs_shape: Vec<i64>,
}

impl Exported {
    /// The pass every method is traced from: observations as given (cast to f32, the
    /// environment's kind), normalised as in training, through the policy.
    fn outputs(&self, obs: &Tensor, state: Option<&Tensor>) -> Result<Outputs> {
        let obs = obs.to_kind(Kind::Float);
        let obs = match &self.normalizer {
            Some(n) => n.apply(&obs),
            None => obs,
        };
        self.policy.outputs(&obs, state)
    }

    /// Example observations: `batch` rows of standard normal values of the policy's shape.
    fn observations(&self, batch: i64) -> Tensor {
        let mut shape = vec![batch];
        shape.extend_from_slice(&self.obs_shape);
        Tensor::randn(shape.as_slice(), (Kind::Float, tch::Device::Cpu))
    }

    fn inputs(&self, batch: i64) -> Vec<Tensor> {
        let obs = self.observations(batch);
        match self.policy.state_width() {
            Some(width) => {
                let state = Tensor::randn([batch, width], (Kind::Float, tch::Device::Cpu));
                vec![obs, state]
            }
            None => vec![obs],
        }
    }

    fn run(&self, inputs: &[Tensor]) -> Result<Outputs> {
        self.outputs(&inputs[0], inputs.get(1))
    }

    /// The module's methods as pieces of one pass: each method's name and which output of
    /// [`Exported::run`] it returns.
    fn methods(&self) -> Result<Vec<(&'static str, Pick)>> {
        let probe = self.run(&self.inputs(1))?;
        let mut methods = vec![("forward", Pick::Actions)];
        if probe.state.is_some() {
            methods.push(("next_state", Pick::State));
        }
        for (i, (name, _)) in probe.parameters.iter().enumerate() {
            methods.push((name, Pick::Parameter(i)));
        }
        methods.push(("value", Pick::Value));
        Ok(methods)
    }

    fn trace(&self) -> Result<Traced> {
        let example = self.inputs(TRACE_BATCH);
        let pass = |inputs: &[Tensor], pick: Pick| Ok(vec![pick.of(self.run(inputs)?)]);
        let mut module = Traced::new(&example, |inputs| pass(inputs, Pick::Actions))?;
        for (name, pick) in self.methods()?.into_iter().skip(1) {
            module.trace(name, &example, |inputs| pass(inputs, pick))?;
        }
        if let Some(width) = self.policy.state_width() {
            module.trace("initial_state", &example[..1], |inputs| {
                // Shaped by the observations, so any batch gets its own zeros.
                let column = inputs[0].flatten(1, -1).narrow(1, 0, 1);
                Ok(vec![
                    column.zeros_like().to_kind(Kind::Float).repeat([1, width]),
                ])
            })?;
        }
        Ok(module)
    }

    /// Loads the written module and runs every method on other observations than it was traced
    /// on, against the policy: an export that would act differently is an error.
    fn check(&self, path: &Path) -> Result<()> {
        let module =
            CModule::load(path).map_err(|e| anyhow!("cannot load {} back: {e}", path.display()))?;
        let inputs = self.inputs(CHECK_BATCH);
        let ivalues: Vec<IValue> = inputs.iter().map(|t| IValue::Tensor(t.copy())).collect();
        for (name, pick) in self.methods()? {
            let want = pick.of(self.run(&inputs)?);
            let got = match module.method_is(name, &ivalues) {
                Ok(IValue::Tensor(t)) => t,
                Ok(other) => bail!("the exported `{name}` returned {other:?}, not a tensor"),
                Err(e) => bail!("the exported `{name}` fails: {e}"),
            };
            ensure!(
                got.equal(&want),
                "the exported `{name}` does not reproduce the policy on {CHECK_BATCH} \
                 observations; please report this with the run's config"
            );
        }
        Ok(())
    }

    /// The ONNX graph's outputs besides `action`, as the module's methods name them, in order:
    /// the distribution's parameters, then the value.
    fn onnx_outputs(&self) -> Result<Vec<&'static str>> {
        Ok((self.methods()?.into_iter())
            .filter(|(_, pick)| matches!(pick, Pick::Parameter(_) | Pick::Value))
            .map(|(name, _)| name)
            .collect())
    }

    fn describe_onnx(&self) -> Result<String> {
        let normalizer = self.normalizer_note();
        let mut outputs = vec!["action"];
        outputs.extend(self.onnx_outputs()?);
        let obs = self.obs_batch_shape();
        let inputs = match self.policy.state_width() {
            Some(width) => {
                outputs.push("next_state");
                format!(
                    "inputs {obs} (float32), state [batch, {width}] (zeros at an episode's start)"
                )
            }
            None => format!("input {obs} (float32)"),
        };
        Ok(format!(
            "{normalizer}{inputs}; outputs {}",
            outputs.join(", ")
        ))
    }

    /// What the description says first where the module normalises observations.
    fn normalizer_note(&self) -> &'static str {
        match self.normalizer {
            Some(_) => "normalises observations with the checkpoint's statistics; ",
            None => "",
        }
    }

    /// `obs [batch, d0, d1, ...]`: what every method takes first (the Python package reads it).
    fn obs_batch_shape(&self) -> String {
        let dims: Vec<String> = self.obs_shape.iter().map(i64::to_string).collect();
        format!("obs [batch, {}]", dims.join(", "))
    }

    fn describe(&self) -> Result<String> {
        let normalizer = self.normalizer_note();
        let mut methods: Vec<&str> = self.methods()?.iter().map(|(name, _)| *name).collect();
        let obs = self.obs_batch_shape();
        let takes = match self.policy.state_width() {
            Some(width) => {
                methods.push("initial_state");
                format!("(obs, state), {obs}, state [batch, {width}]; initial_state takes obs")
            }
            None => format!("(obs), {obs}"),
        };
        Ok(format!(
            "{normalizer}methods {} take {takes}",
            methods.join(", ")
        ))
    }
}

mod onnx;

/// Which output of a pass a method returns.
#[derive(Debug, Clone, Copy)]
enum Pick {
    Actions,
    State,
    Parameter(usize),
    Value,
}

impl Pick {
    fn of(self, out: Outputs) -> Tensor {
        match self {
            Pick::Actions => out.actions,
            Pick::State => out.state.expect("picked only for a recurrent policy"),
            Pick::Parameter(i) => {
                (out.parameters.into_iter().nth(i))
                    .expect("a parameter the probe listed")
                    .1
            }
            Pick::Value => out.value,
        }
    }
}

/// Writes the module atomically ([`crate::atomic::replace_with`]): a failed export leaves no
/// half-written file under the name.
fn save(module: &Traced, output: &Path) -> Result<()> {
    crate::atomic::replace_with(output, |partial| {
        let name = c_path(partial).map_err(std::io::Error::other)?;
        // SAFETY: `module.0` is a live module (owned by `module`); `name` outlives the call.
        unsafe { torch_sys::atm_save(module.0, name.as_ptr()) };
        torch_error().map_err(std::io::Error::other)
    })
    .with_context(|| format!("cannot write {}", output.display()))
}

fn c_path(path: &Path) -> Result<CString> {
    CString::new(path.to_string_lossy().as_bytes())
        .with_context(|| format!("{} holds a NUL byte", path.display()))
}

/// A TorchScript module built by tracing, freed when dropped.
struct Traced(*mut torch_sys::CModule_);

impl Drop for Traced {
    fn drop(&mut self) {
        // SAFETY: the pointer came from atm_create_for_tracing, is owned by this value alone
        // and is freed once, here.
        unsafe { torch_sys::atm_free(self.0) }
    }
}

impl Traced {
    /// A module whose `forward` is `f` traced on `inputs`.
    fn new(inputs: &[Tensor], f: impl FnOnce(&[Tensor]) -> Result<Vec<Tensor>>) -> Result<Traced> {
        let module = start_tracing(inputs)?;
        end_tracing(&module, &module, "forward", inputs, f)?;
        Ok(module)
    }

    /// Adds the method `name`: `f` traced on `inputs`. The trace runs on a scratch module of the
    /// same class (tracing always starts a new module), whose graph then becomes this module's
    /// method; the graph reads only its inputs and constants, never the module.
    fn trace(
        &mut self,
        name: &str,
        inputs: &[Tensor],
        f: impl FnOnce(&[Tensor]) -> Result<Vec<Tensor>>,
    ) -> Result<()> {
        let scratch = start_tracing(inputs)?;
        end_tracing(&scratch, self, name, inputs, f)
    }
}

/// Starts tracing `inputs` into a new module of class [`CLASS`].
fn start_tracing(inputs: &[Tensor]) -> Result<Traced> {
    let class = CString::new(CLASS).expect("a constant without NUL");
    let pointers: Vec<*mut torch_sys::C_tensor> =
        inputs.iter().map(|t| t.as_ptr() as *mut _).collect();
    // SAFETY: `class` and `pointers` outlive the call; each pointer is a live tensor of
    // `inputs`, which libtorch only reads (it registers them as the graph's inputs).
    let module = unsafe {
        torch_sys::atm_create_for_tracing(class.as_ptr(), pointers.as_ptr(), pointers.len() as i32)
    };
    torch_error().context("cannot start tracing the policy")?;
    ensure!(
        !module.is_null(),
        "libtorch returned no module to trace into"
    );
    Ok(Traced(module))
}

/// Runs `f` on `inputs` while tracing (begun by `traced`'s [`start_tracing`]) and ends the
/// trace as `target`'s method `name`. When `f` fails the trace is still ended (libtorch's
/// tracer is per thread and refuses to start while one is open), as a method of the scratch
/// module that is then dropped.
fn end_tracing(
    traced: &Traced,
    target: &Traced,
    name: &str,
    inputs: &[Tensor],
    f: impl FnOnce(&[Tensor]) -> Result<Vec<Tensor>>,
) -> Result<()> {
    let method = CString::new(name).expect("method names are constants without NUL");
    let (into, outputs, result) = match f(inputs) {
        Ok(outputs) => (target, outputs, Ok(())),
        Err(e) => (traced, Vec::new(), Err(e)),
    };
    let pointers: Vec<*mut torch_sys::C_tensor> =
        outputs.iter().map(|t| t.as_ptr() as *mut _).collect();
    // SAFETY: `into.0` is a live module; `method` and `pointers` (live tensors of `outputs`,
    // only read) outlive the call.
    unsafe {
        torch_sys::atm_end_tracing(
            into.0,
            method.as_ptr(),
            pointers.as_ptr(),
            pointers.len() as i32,
        )
    };
    let ended = torch_error().with_context(|| format!("cannot trace the policy's `{name}`"));
    result.and(ended)
}

/// libtorch's error from the last call through torch-sys, if it failed.
fn torch_error() -> Result<()> {
    // SAFETY: returns null or a malloc'd C string that this function owns from here on.
    let message = unsafe { torch_sys::get_and_reset_last_err() };
    if message.is_null() {
        return Ok(());
    }
    // SAFETY: `message` is a NUL-terminated string from libtorch's error slot, read once and
    // freed with the allocator that made it.
    let text = unsafe {
        let text = std::ffi::CStr::from_ptr(message)
            .to_string_lossy()
            .into_owned();
        libc::free(message.cast());
        text
    };
    Err(anyhow!("{text}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_wrappers(wrappers: &str) -> Experiment {
        let text = format!(
            "experiment \"x\" {{\n    algorithm \"ppo\"\n    env \"pendulum\" {{\n        \
             wrappers {{\n            {wrappers}\n        }}\n    }}\n}}\n"
        );
        tandem_config::resolve(&tandem_config::Source::Stdin(text), &[])
            .expect("resolves")
            .experiment
    }

    #[test]
    fn a_normaliser_exports_only_as_the_last_change_to_the_observations() {
        let plain = with_wrappers("clip-reward");
        assert_eq!(Normalizer::of(&plain).unwrap(), None);
        let last = with_wrappers("normalize-obs clip=5; normalize-reward; time-limit 100");
        assert_eq!(Normalizer::of(&last).unwrap(), Some(5.0));
        let stacked = with_wrappers("normalize-obs; frame-stack 2");
        let err = Normalizer::of(&stacked).unwrap_err().to_string();
        assert!(
            err.contains("`frame-stack` changes the observations after `normalize-obs`"),
            "{err}"
        );
    }

    #[test]
    fn the_normaliser_applies_the_wrappers_f32_operations() {
        let stats = tandem_env::NormStats {
            count: 4.0,
            mean: vec![1.0, -2.0],
            var: vec![4.0, 0.25],
        };
        let (mean, inv_std) = stats.f32_mean_and_inv_std(1e-8);
        let normalizer = Normalizer {
            mean: Tensor::from_slice(&mean),
            inv_std: Tensor::from_slice(&inv_std),
            clip: 3.0,
        };
        let obs = Tensor::from_slice(&[3.0f32, -2.5, 100.0, -2.0]).view([2, 2]);
        let got = Vec::<f32>::try_from(normalizer.apply(&obs).flatten(0, -1)).unwrap();
        let want: Vec<f32> = [3.0f32, -2.5, 100.0, -2.0]
            .iter()
            .enumerate()
            .map(|(i, &x)| ((x - mean[i % 2]) * inv_std[i % 2]).clamp(-3.0, 3.0))
            .collect();
        assert_eq!(got, want);
        assert_eq!(got, [1.0, -1.0, 3.0, 0.0]);
    }
}
