//! Where member credentials come from, read again on every use so a rotated kubeconfig
//! or Secret is picked up without a restart.

use std::path::PathBuf;

use anyhow::Context;
use kube::config::Kubeconfig;

use super::connect;
use crate::host::Host;

/// The source of member credentials.
#[derive(Debug, Clone)]
pub enum Credentials {
    /// A kubeconfig file with one context per member.
    File(PathBuf),
    /// Labelled Secrets in the controller's namespace of the host cluster.
    Secrets {
        /// The controller's namespace.
        namespace: String,
    },
    /// The cluster this process runs in, named as the member it is the agent of.
    InCluster {
        /// The member's name.
        cluster: String,
    },
}

impl Credentials {
    /// The members' kubeconfig, now.
    pub async fn read(&self, host: &Host) -> anyhow::Result<Kubeconfig> {
        match self {
            Self::File(path) => Ok(connect::read(path)?),
            Self::Secrets { namespace } => Ok(connect::from_secrets(&host.client().await?, namespace).await?),
            Self::InCluster { cluster } => {
                let server =
                    std::env::var("KUBERNETES_SERVICE_HOST").ok().zip(std::env::var("KUBERNETES_SERVICE_PORT").ok());
                let (address, port) =
                    server.context("not in a Pod (KUBERNETES_SERVICE_HOST/PORT unset): pass --kubeconfig")?;
                Ok(connect::in_cluster(cluster, &address, &port))
            }
        }
    }
}
