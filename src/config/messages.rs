//! Problems the config reader reports that need more than a few words, as an operator reads
//! them after the key they are about. Wording only; which key has which problem belongs to
//! the reader of each table.

/// `ignore[n].cluster` of a rule that names a VM by name.
pub const IGNORE_VM_NAME_WITHOUT_CLUSTER: &str = "is missing: a rule with a VM name names its \
     cluster (by id, or by name), or it matches that VM name in every tenant's cluster; or give \
     the VM's id instead of its name";

/// `ignore[n].cluster` of a rule that names a node.
pub const IGNORE_NODE_WITHOUT_CLUSTER: &str = "is missing: a rule with a node names its cluster \
     (by id, or by name), or it matches that node name in every tenant's cluster";

/// `ignore[n].reason`.
pub const IGNORE_NO_REASON: &str =
    "is missing; say why this drift is accepted (it is shown with every finding the rule matches)";

/// `alertmanager.password_file` when a user name is set.
pub const ALERTMANAGER_NO_PASSWORD: &str =
    "is missing while alertmanager.username is set; point it at a file holding the password";

/// The config file named on the command line does not exist.
pub const NO_CONFIG_FILE: &str = "no such file; pass the right path with -c (the package installs \
     /etc/cks-drift/cks-drift.toml; in a source tree, start from config/cks-drift.toml)";
