//! The service's background loops: the relay and the periodic chores
//! (reaper, sweeps), started once the server runs and, in `dev`, once the
//! embedded workers consume.

use taskworker::queue::InProcessQueue;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::backends::Backends;
use crate::dispatch::in_process::InProcessPublisher;
use crate::dispatch::rabbitmq::RabbitPublisher;
use crate::dispatch::relay;
use crate::health::QueueHealth;
use crate::periodic::Chore;
use crate::settings::{QueueLocation, QueueSettings, ServiceSettings};

/// What the background loops are made from (borrowed from a [`Service`]
/// whose server already runs).
pub(super) struct LoopParts<'a> {
    pub(super) backends: &'a Backends,
    pub(super) settings: &'a ServiceSettings,
    pub(super) queue_health: &'a QueueHealth,
    pub(super) in_process: Option<&'a InProcessQueue>,
}

impl LoopParts<'_> {
    /// The relay and the periodic chores the settings ask for.
    pub(super) fn spawn_loops(&self, stop: &CancellationToken) -> Vec<JoinHandle<()>> {
        let backends = &self.backends;
        let mut loops = Vec::new();
        if let Some(chores) = self.settings.chores {
            let reaper = Chore::ReapExpiredLeases(backends.dispatch.clone());
            loops.push(reaper.spawn(chores.reaper_interval, stop.clone()));
            if let Some(interval) = chores.cleanup_interval {
                for chore in [
                    Chore::SweepExpiredTasks(backends.store.clone()),
                    Chore::ForgetSilentWorkers(backends.operations.clone()),
                ] {
                    loops.push(chore.spawn(interval, stop.clone()));
                }
            }
        }
        if let Some(queue) = &self.settings.queue {
            loops.push(self.spawn_relay(queue, stop.clone()));
        }
        loops
    }

    fn spawn_relay(&self, queue: &QueueSettings, stop: CancellationToken) -> JoinHandle<()> {
        let (store, health) = (self.backends.dispatch.clone(), self.queue_health.clone());
        match (&queue.location, self.in_process) {
            (QueueLocation::RabbitMq(url), _) => {
                let connect = RabbitPublisher::connector(
                    url.clone(),
                    queue.broker_tls.clone(),
                    queue.topology.clone(),
                    queue.fault,
                );
                relay::spawn(store, connect, queue.poll_interval, health, stop)
            }
            (QueueLocation::InProcess, Some(in_process)) => {
                let connect = InProcessPublisher::connector(in_process.clone());
                relay::spawn(store, connect, queue.poll_interval, health, stop)
            }
            // `build` makes the in-process queue whenever the settings ask
            // for one, so this cannot happen; relay nothing rather than panic.
            (QueueLocation::InProcess, None) => tokio::spawn(async {}),
        }
    }
}
