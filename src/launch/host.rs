//! What a resolved experiment needs of this build and this machine, which the resolver does not
//! look at (a resolution is a function of its files): CUDA compiled in and GPUs here, the
//! gymnasium interpreter, and, with `deep`, a gymnasium environment's action space against the
//! algorithm and its observation against the network, which only building the environment
//! tells, and the shapes of a network declared as layers. `tandem validate` reports these at the
//! setting's line, so it accepts nothing that `train` refuses at once.

use std::path::Path;

use tandem_config::cli::HostFindings;
use tandem_config::{Device, Diagnostic, Game, Resolved, Severity};
use tandem_env::{BridgeOptions, VecEnv};

/// Every finding for `resolved` here; the environment is built (a Python worker started for
/// gymnasium) only with `deep`, and only when nothing cheaper has failed.
pub fn findings(resolved: &Resolved, deep: bool) -> Vec<Diagnostic> {
    check(resolved, deep).diagnostics
}

/// [`findings`], and with `deep` a declared network's layers and the shape each gives, from
/// one build of the environment.
pub fn check(resolved: &Resolved, deep: bool) -> HostFindings {
    let mut diagnostics: Vec<Diagnostic> = cuda(resolved).into_iter().collect();
    diagnostics.extend(interpreter(resolved));
    let failed = diagnostics.iter().any(|d| d.severity() == Severity::Error);
    if !deep || failed {
        return HostFindings {
            diagnostics,
            notes: Vec::new(),
        };
    }
    let (found, built_input) = built(resolved);
    diagnostics.extend(found);
    HostFindings {
        diagnostics,
        notes: network_shapes(resolved, built_input),
    }
}

/// A declared network's layers and the shape each gives, on what the network reads: the
/// observation the config knows, else `built_input`, what it reads of the environment built
/// here. Nothing for the built-in torsos, or where a layer does not fit (the findings say so).
fn network_shapes(resolved: &Resolved, built_input: Option<Vec<usize>>) -> Vec<String> {
    let e = &resolved.experiment;
    let tandem_config::Torso::Layers { layers } = &e.network.torso else {
        return Vec::new();
    };
    let input = e
        .observation()
        .map(|obs| obs.network_shape())
        .or(built_input);
    input
        .and_then(|input| tandem_config::layer::table(layers, &input))
        .unwrap_or_default()
}

/// A CUDA device in a build without CUDA is an error; one this machine does not have is a
/// warning (the run may be meant for another machine).
fn cuda(resolved: &Resolved) -> Option<Diagnostic> {
    let highest = resolved
        .experiment
        .devices
        .iter()
        .filter_map(|d| match d {
            Device::Cuda(i) => Some(*i),
            Device::Cpu => None,
        })
        .max()?;
    if !crate::dist::compiled_backends().contains(&"nccl") {
        return Some(resolved.finding_at(
            Severity::Error,
            "devices",
            "host::no-cuda",
            "this tandem was built without CUDA",
            &format!("cuda:{highest} needs a build with `--features cuda`"),
            "list `cpu` devices, or run a tandem built with `--features cuda` (`tandem --version` says which)",
        ));
    }
    let here = if tch::Cuda::is_available() {
        tch::Cuda::device_count()
    } else {
        0
    };
    (highest as i64 >= here).then(|| {
        resolved.finding_at(
            Severity::Warning,
            "devices",
            "host::missing-gpu",
            format!("this machine has {here} usable CUDA device(s)"),
            &format!("cuda:{highest} is not among them"),
            "fine if the run goes to a machine that has it; here `train` would refuse it",
        )
    })
}

/// A gymnasium or pettingzoo environment's `python` must be an interpreter here: a path that
/// exists, or a name found on `PATH` (as the bridge starts it).
fn interpreter(resolved: &Resolved) -> Option<Diagnostic> {
    let python = match &resolved.experiment.env.game {
        Game::Gymnasium(gym) => &gym.python,
        Game::PettingZoo(zoo) => &zoo.python,
        _ => return None,
    };
    let why = why_not_a_program(python)?;
    Some(resolved.finding_at(
        Severity::Error,
        "env.python",
        "host::no-interpreter",
        format!("`{python}` is not an interpreter on this machine"),
        why,
        "set `python` to an interpreter that has gymnasium (and pettingzoo, for a pettingzoo environment; for example the venv that \
         scripts/gym-venv-setup.sh makes: .deps/venv-gym/bin/python; a relative path is from \
         the folder of the file that names it)",
    ))
}

/// Why `Command::new(name)` would not find a program to run, or `None` when it would.
fn why_not_a_program(name: &str) -> Option<&'static str> {
    let executable = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if name.contains('/') {
        let path = Path::new(name);
        return match path.exists() {
            true if executable(path) => None,
            true => Some("not an executable file"),
            false => Some("no such file"),
        };
    }
    let search = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&search).any(|dir| executable(&dir.join(name)));
    (!found).then_some("not found on PATH")
}

/// One environment of the experiment's game, built as a rank would through the bridge.
fn build_one(e: &tandem_config::Experiment) -> Result<VecEnv, tandem_env::EnvError> {
    let bridge = BridgeOptions {
        log_prefix: "validate ".into(),
        render: false,
    };
    let seeds = tandem_env::env_seeds(e.seed, 0, 0, 1);
    VecEnv::with_bridge(&crate::train::envs::env_spec(e), &seeds, 1, &bridge)
}

/// Builds one gymnasium or pettingzoo environment and checks its action space against the
/// algorithm and its observation against the network (the resolver does both for the games it
/// knows); a pettingzoo environment's agents against its `agents` and `train.policies` too.
/// With the findings, the shape the network reads of it (`None` where nothing was built).
fn built(resolved: &Resolved) -> (Vec<Diagnostic>, Option<Vec<usize>>) {
    let e = &resolved.experiment;
    let (at, what) = match e.env.game {
        Game::Gymnasium(_) => ("env.id", "gymnasium could not make it"),
        Game::PettingZoo(_) => ("env.module", "the bridge could not build it"),
        _ => return (Vec::new(), None),
    };
    let envs = match build_one(e) {
        Ok(envs) => envs,
        // The bridge's error holds Python's whole exception message (several lines, or one
        // longer than a label keeps) and its traceback: the help carries it, message first.
        Err(error) => {
            let finding = resolved.finding_at(
                Severity::Error,
                at,
                "host::env",
                "the environment cannot be built here",
                what,
                format!(
                    "{error}\n(`tandem validate --deep` builds one environment as a rank would)"
                ),
            );
            return (vec![finding], None);
        }
    };
    let input = crate::algo::learner::network_for(e, &envs)
        .ok()
        .map(|(_, shape)| shape.iter().map(|&d| d.max(0) as usize).collect());
    let found = action_space(resolved, &envs)
        .into_iter()
        .chain(network(resolved, &envs))
        .chain(policies(resolved, &envs))
        .collect();
    (found, input)
}

/// Several policies' patterns against the built game's agents, which the resolver knows only
/// for the catalogue's games.
fn policies(resolved: &Resolved, envs: &VecEnv) -> Option<Diagnostic> {
    let refusal = crate::algo::policies::seated_plans(&resolved.experiment, envs).err()?;
    Some(resolved.finding_at(
        Severity::Error,
        "train.policies",
        "host::policies",
        "the policies do not fit the environment's agents",
        "several policies",
        format!("{refusal:#}"),
    ))
}

fn action_space(resolved: &Resolved, envs: &VecEnv) -> Option<Diagnostic> {
    let e = &resolved.experiment;
    let space = envs.action_space();
    let refusal = crate::algo::build::takes_the_action_space(&e.algorithm, space).err()?;
    Some(resolved.finding_at(
        Severity::Error,
        "algorithm",
        "host::action-space",
        format!("{} cannot act in this environment", e.algorithm.name()),
        &format!("the environment takes {space}"),
        format!("{refusal:#}"),
    ))
}

/// The network's torso built, on the CPU, for the environment's observation: an image torso on
/// vectors, or on an image too small for its windows, is refused at the network's line.
fn network(resolved: &Resolved, envs: &VecEnv) -> Option<Diagnostic> {
    let e = &resolved.experiment;
    let observation = envs.env_observation_space();
    let fits = || -> anyhow::Result<()> {
        let (spec, shape) = crate::algo::learner::network_for(e, envs)?;
        let store = tch::nn::VarStore::new(tch::Device::Cpu);
        crate::nn::Torso::new(&store.root(), &spec.network, &spec.init, &shape)?;
        Ok(())
    };
    let refusal = fits().err()?;
    Some(resolved.finding_at(
        Severity::Error,
        "network",
        "host::network",
        format!(
            "network `{}` does not fit this environment's observations",
            e.network.torso.name()
        ),
        &format!("{refusal:#}"),
        format!(
            "after its wrappers, the environment observes {}",
            observation.describe()
        ),
    ))
}
