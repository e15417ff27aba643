//! A private CA and the server certificates it signs, made with `openssl` in a test's
//! directory, as an operator would issue them: for the TLS servers the tests start (an
//! `openssl s_server` in front of the fake CloudStack, the test MariaDB).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs `openssl` with `args` in `dir`, and fails the test with its error output if it fails.
pub fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run openssl (Debian: apt-get install openssl)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A private CA (`ca.pem`, `ca.key`) in `dir`.
pub struct TestCa {
    dir: PathBuf,
}

impl TestCa {
    pub fn new(dir: &Path) -> TestCa {
        openssl(
            dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "2",
                "-subj",
                "/CN=cks-drift test CA",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
        );
        TestCa {
            dir: dir.to_path_buf(),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// A server certificate `<name>.pem` (key `<name>.key`) with subject CN `cn` and these
    /// subjectAltNames (none when empty, as in MySQL's auto-generated certificates), signed by
    /// the CA. Returns the certificate's and the key's paths.
    pub fn server(&self, name: &str, cn: &str, alt_names: &[&str]) -> (PathBuf, PathBuf) {
        let mut ext = String::from("basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n");
        if !alt_names.is_empty() {
            ext.push_str(&format!("subjectAltName={}\n", alt_names.join(",")));
        }
        let (key, csr, pem, extfile) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.pem"),
            format!("{name}.ext"),
        );
        std::fs::write(self.path(&extfile), ext).unwrap();
        openssl(
            &self.dir,
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                &key,
                "-out",
                &csr,
                "-subj",
                &format!("/CN={cn}"),
            ],
        );
        openssl(
            &self.dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &pem,
                "-days",
                "2",
                "-extfile",
                &extfile,
            ],
        );
        (self.path(&pem), self.path(&key))
    }
}
