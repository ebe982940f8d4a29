//! Real connection-management traffic between two rxe hosts, for the golden CM MAD tests: two VMs of the
//! lab's image back to back on one link (VM A listens on the link's socket, VM B connects to it; no RNIC in
//! between), qemu's `filter-dump` writing every frame of the link to a pcap. VM A (10.0.0.1) runs the servers
//! of the librdmacm tools, VM B (10.0.0.2) their clients:
//!
//! * `rping` to a port nobody listens on: REQ, REJ (reason 8, invalid service ID);
//! * `rping` (RC, PS_TCP port 7174, two 64-byte iterations with data checked): REQ, REP, RTU, the data, DREQ,
//!   DREP;
//! * `udaddy` (UD, PS_UDP 7174): SIDR_REQ, SIDR_REP, then UD SENDs;
//! * `ucmatose` with two connections (PS_TCP 7471).
//!
//! `rnic capture-cm --out FILE` runs it; `testbench/data/rxe-cm.pcap` is its output (see the README there).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::vm::{Vm, VmConfig, VmOutcome};
use super::VmImage;
use testbench::wire::MacAddr;

/// The clients' runs as the VM's script reports them: `=== CM_CLIENT name rc=N ===`.
const CLIENTS: &[(&str, &str)] = &[
    ("rping_no_listener", "rping -c -a 10.0.0.1 -p 9999 -C 1 -S 64"),
    ("rping", "rping -c -a 10.0.0.1 -p 7174 -C 2 -S 64 -V"),
    ("udaddy", "udaddy -s 10.0.0.1"),
    ("ucmatose", "ucmatose -s 10.0.0.1 -c 2"),
];

/// What a capture run gives: the pcap and each client's exit status.
#[derive(Debug)]
pub struct CmCapture {
    pub pcap: PathBuf,
    pub clients: Vec<(String, Option<i32>)>,
    pub server: VmOutcome,
    pub client: VmOutcome,
}

impl CmCapture {
    /// Every client ran as expected: the one without a listener refused (rping exits non-zero), the rest 0.
    pub fn ok(&self) -> bool {
        self.server.ok()
            && self.client.ok()
            && self.clients.iter().all(|(n, rc)| if n == "rping_no_listener" { rc.is_some_and(|r| r != 0) } else { *rc == Some(0) })
    }
}

fn server_script() -> String {
    // each server serves its client(s) and exits; the timeouts end a run whose client never came
    "timeout 60 rping -s -a 10.0.0.1 -p 7174 -C 2 -S 64 -V > /tmp/rping.log 2>&1 &\n\
     timeout 60 udaddy > /tmp/udaddy.log 2>&1 &\n\
     timeout 60 ucmatose -c 2 > /tmp/ucmatose.log 2>&1 &\n\
     echo '=== CM_SERVERS_UP ==='\n\
     wait\n\
     for f in rping udaddy ucmatose; do echo \"--- $f\"; cat /tmp/$f.log; done\n\
     sleep 1\n"
        .to_string()
}

fn client_script() -> String {
    // the servers start as VM A's script begins; VM B boots at about the same time, so it waits a little
    let mut s = String::from("sleep 3\n");
    for (name, cmd) in CLIENTS {
        s.push_str(&format!("timeout 30 {cmd}; echo \"=== CM_CLIENT {name} rc=$? ===\"\nsleep 1\n"));
    }
    s
}

/// The `rc` of each client from VM B's console.
fn client_rcs(log: &str) -> Vec<(String, Option<i32>)> {
    CLIENTS
        .iter()
        .map(|(name, _)| {
            let tag = format!("=== CM_CLIENT {name} rc=");
            let rc = log.lines().find_map(|l| l.split(&tag).nth(1)?.split(' ').next()?.parse().ok());
            (name.to_string(), rc)
        })
        .collect()
}

/// Run both VMs and write the link's frames to `out`.
pub fn capture_cm(image: &VmImage, out: &Path) -> Result<CmCapture> {
    let dir = super::run_dir("capture-cm");
    std::fs::create_dir_all(&dir)?;
    let socket = super::temp_socket_path("cm");
    let _ = std::fs::remove_file(&socket);
    let out = std::path::absolute(out).context("the pcap's path")?;
    let mut a = VmConfig::new("a", image.clone(), &socket, &dir);
    a.mac = MacAddr([0x52, 0x54, 0, 0, 0, 0x0a]);
    a.stream_server = true;
    a.dump = Some(out.clone());
    a.timeout = Duration::from_secs(120);
    a.script = Some(server_script());
    let mut b = VmConfig::new("b", image.clone(), &socket, &dir);
    b.ip = std::net::Ipv4Addr::new(10, 0, 0, 2);
    b.mac = MacAddr([0x52, 0x54, 0, 0, 0, 0x0b]);
    b.timeout = Duration::from_secs(120);
    b.script = Some(client_script());
    let va = Vm::spawn(&a)?;
    // VM B connects once VM A's qemu listens
    let t0 = Instant::now();
    while !socket.exists() {
        if t0.elapsed() > Duration::from_secs(10) {
            bail!("VM A's qemu did not create {} within 10 s:\n{}", socket.display(), va.log());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let vb = Vm::spawn(&b)?;
    let client = vb.wait()?;
    let server = va.wait()?;
    let _ = std::fs::remove_file(&socket);
    Ok(CmCapture { pcap: out, clients: client_rcs(&client.log), server, client })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_exit_status_from_the_console() {
        let log = "x\n=== CM_CLIENT rping_no_listener rc=255 ===\n=== CM_CLIENT rping rc=0 ===\n";
        let rcs = client_rcs(log);
        assert_eq!(rcs[0], ("rping_no_listener".to_string(), Some(255)));
        assert_eq!(rcs[1], ("rping".to_string(), Some(0)));
        assert_eq!(rcs[2], ("udaddy".to_string(), None));
    }
}
