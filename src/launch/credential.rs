//! The job's secret, which every rank shows the rendezvous store to be let in
//! ([`crate::dist::JobSecret`]): where it comes from, and how the launcher hands it to its
//! workers (first line of their stdin, before the config: never on a command line, where `ps`
//! would show it). A credential, not configuration: it changes nothing a run computes.
//!
//! Sources, strongest first:
//! - `TANDEM_JOB_SECRET`, when set: whatever the user put there (the same on every node);
//! - a one-node launcher's own random secret, known only to it and its workers;
//! - derived from facts every rank of the job is given (the scheduler's job id, the master's
//!   address): it keeps out strays and other jobs, not someone who can read them. The config
//!   hash is left out on purpose: ranks with different configs must get in far enough to be
//!   told so at the rendezvous ("config-hash differs"), not be refused as strangers.

use anyhow::{Context, Result, bail};

use crate::dist::JobSecret;

pub const ENV: &str = "TANDEM_JOB_SECRET";
const HEADER: &str = "tandem-job-secret ";

/// A secret and a sentence saying where it came from (logged by each rank).
#[derive(Debug, Clone)]
pub struct Credential {
    pub secret: JobSecret,
    pub source: String,
}

impl Credential {
    /// For a launcher that starts `nnodes`' worth of ranks of the job at `master:port`;
    /// `job_ids` are the scheduler's ([`super::job_env::JobEnv::job_ids`]).
    pub fn for_launcher(
        nnodes: usize,
        master: &str,
        port: u16,
        job_ids: &[String],
    ) -> Result<Credential> {
        if let Some(c) = from_env() {
            return Ok(c);
        }
        if nnodes == 1 {
            return Ok(Credential {
                secret: JobSecret::random().context("cannot draw the job's secret")?,
                source: "drawn at random by this launcher".into(),
            });
        }
        Ok(derived(master, port, job_ids))
    }

    /// For a rank that an external launcher (torchrun, srun) started on its own.
    pub fn for_external_rank(master: &str, port: u16, job_ids: &[String]) -> Credential {
        from_env().unwrap_or_else(|| derived(master, port, job_ids))
    }

    /// The line the launcher writes to a worker's stdin before the config.
    pub fn header(&self) -> String {
        format!("{HEADER}{} {}\n", self.secret.to_hex(), self.source)
    }

    /// Splits a worker's stdin into the credential and the config text that follows it.
    pub fn read_header(text: &str) -> Result<(Credential, &str)> {
        let (line, rest) = text.split_once('\n').unwrap_or((text, ""));
        let Some(fields) = line.strip_prefix(HEADER) else {
            bail!(
                "a worker's stdin must start with the job's secret (workers are started by `tandem train`)"
            );
        };
        let (hex, source) = fields.split_once(' ').unwrap_or((fields, "unknown"));
        let secret = JobSecret::from_hex(hex).context("the job's secret on stdin is malformed")?;
        Ok((
            Credential {
                secret,
                source: source.to_string(),
            },
            rest,
        ))
    }
}

fn from_env() -> Option<Credential> {
    let text = std::env::var(ENV).ok().filter(|s| !s.is_empty())?;
    Some(Credential {
        secret: JobSecret::derive(&["user", &text]),
        source: format!("from {ENV}"),
    })
}

fn derived(master: &str, port: u16, ids: &[String]) -> Credential {
    let endpoint = format!("{master}:{port}");
    let mut parts: Vec<&str> = vec!["derived", &endpoint];
    parts.extend(ids.iter().map(String::as_str));
    let names: Vec<&str> = ids
        .iter()
        .map(|s| s.split('=').next().unwrap_or(s))
        .collect();
    let from = if names.is_empty() {
        "the master address".to_string()
    } else {
        format!("{} and the master address", names.join(", "))
    };
    Credential {
        secret: JobSecret::derive(&parts),
        source: format!(
            "derived from {from} (keeps out strays and other jobs, not whoever can read those; set {ENV} for a real secret)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_carries_the_secret_and_leaves_the_config_as_it_was() {
        let c = Credential {
            secret: JobSecret::derive(&["x"]),
            source: "from a test".into(),
        };
        let text = format!("{}experiment \"a\" {{\n}}\n", c.header());
        let (back, config) = Credential::read_header(&text).unwrap();
        assert_eq!(back.secret, c.secret);
        assert_eq!(back.source, "from a test");
        assert_eq!(config, "experiment \"a\" {\n}\n");
        assert!(Credential::read_header("experiment \"a\" {}").is_err());
    }

    #[test]
    fn derived_secrets_differ_by_master() {
        let a = derived("10.0.0.1", 29500, &[]).secret;
        assert_eq!(a, derived("10.0.0.1", 29500, &[]).secret);
        assert_ne!(a, derived("10.0.0.2", 29500, &[]).secret);
        assert_ne!(a, derived("10.0.0.1", 29501, &[]).secret);
    }

    #[test]
    fn derived_secrets_differ_by_job_id_and_name_it() {
        let job = |id: &str| vec![format!("SLURM_JOB_ID={id}")];
        let a = derived("10.0.0.1", 29500, &job("7"));
        assert_eq!(a.secret, derived("10.0.0.1", 29500, &job("7")).secret);
        assert_ne!(a.secret, derived("10.0.0.1", 29500, &job("8")).secret);
        assert_ne!(a.secret, derived("10.0.0.1", 29500, &[]).secret);
        assert!(
            a.source
                .starts_with("derived from SLURM_JOB_ID and the master address")
        );
    }
}
