//! The changes tests make to a world: VM and cluster states, expunged and unmanaged VMs, map
//! rows added and removed, destroyed clusters, the clock moved on.

use std::time::Duration;

use super::World;

impl World {
    /// Sets a VM's state and stamps `lastupdated`, as every state transition does.
    ///
    /// # Panics
    /// If the VM does not exist.
    pub fn set_vm_state(&mut self, vm_id: &str, state: &str) {
        let now = self.now;
        let vm = self.vm_mut(vm_id);
        vm.state = state.to_string();
        vm.lastupdated = now;
    }

    /// Expunges a VM: state Expunging and the row removed, so listings no longer show it.
    pub fn expunge_vm(&mut self, vm_id: &str) {
        self.set_vm_state(vm_id, "Expunging");
        self.vm_mut(vm_id).removed = true;
    }

    /// Unmanages a VM: the row is removed but keeps its state.
    pub fn unmanage_vm(&mut self, vm_id: &str) {
        self.vm_mut(vm_id).removed = true;
    }

    /// Deletes the first map row pointing at `vm_id`; false if there was none.
    pub fn remove_map_row(&mut self, cluster_id: &str, vm_id: &str) -> bool {
        let map = &mut self.cluster_mut(cluster_id).map;
        match map.iter().position(|v| v == vm_id) {
            Some(i) => {
                map.remove(i);
                true
            }
            None => false,
        }
    }

    /// Appends a map row; the VM need not exist.
    pub fn add_map_row(&mut self, cluster_id: &str, vm_id: &str) {
        self.cluster_mut(cluster_id).map.push(vm_id.to_string());
    }

    pub fn set_cluster_state(&mut self, cluster_id: &str, state: &str) {
        self.cluster_mut(cluster_id).state = state.to_string();
    }

    /// Destroys a cluster: state Destroyed and removed, so it is never listed again, and its
    /// annotations removed with it (`KubernetesClusterDestroyWorker`:
    /// `annotationDao.removeByEntityType("KUBERNETES_CLUSTER", uuid)`).
    pub fn destroy_cluster(&mut self, cluster_id: &str) {
        let c = self.cluster_mut(cluster_id);
        c.state = "Destroyed".to_string();
        c.removed = true;
        for a in &mut self.annotations {
            if a.entity_type == "KUBERNETES_CLUSTER" && a.entity_id == cluster_id {
                a.removed = true;
            }
        }
    }

    /// Moves the simulated clock forward.
    pub fn advance(&mut self, by: Duration) {
        self.now = self.now.plus(by);
    }
}
