//! GPU clocks and temperature around a sample: `nvidia-smi` when it answers,
//! else amdgpu hwmon in sysfs. Absent tools mean no telemetry, never an error.

use katlas_model::ledger::Telemetry;
use std::path::Path;
use std::process::Command;

/// Temperature at which a sample is flagged even without driver throttle bits.
pub const HOT_C: f64 = 90.0;

pub fn read() -> Option<Telemetry> {
    nvidia_smi().or_else(|| hwmon(Path::new("/sys/class/drm")))
}

fn nvidia_smi() -> Option<Telemetry> {
    // Drivers before 535 call the reasons field `clocks_throttle_reasons`.
    for reasons in ["clocks_event_reasons.active", "clocks_throttle_reasons.active"] {
        let query = format!("--query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw,{reasons}");
        let Ok(out) = Command::new("nvidia-smi").args([query.as_str(), "--format=csv,noheader,nounits"]).output() else {
            return None;
        };
        if out.status.success() {
            return parse_nvidia_smi(&String::from_utf8_lossy(&out.stdout));
        }
    }
    None
}

/// One CSV line per GPU; the first GPU is the one measured.
pub fn parse_nvidia_smi(text: &str) -> Option<Telemetry> {
    let line = text.lines().find(|l| !l.trim().is_empty())?;
    let f: Vec<&str> = line.split(',').map(str::trim).collect();
    if f.len() < 4 {
        return None;
    }
    let num = |s: &str| s.parse::<f64>().ok();
    let mut t = Telemetry {
        source: "nvidia-smi".into(),
        sm_clock_mhz: num(f[0]),
        mem_clock_mhz: num(f[1]),
        temperature_c: num(f[2]),
        power_w: num(f[3]),
        throttle_reasons: Vec::new(),
    };
    if let Some(mask) = f.get(4).and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok()) {
        // Bits from nvml's clocks event reasons; idle and app-clock settings are not throttling.
        const REASONS: &[(u64, &str)] =
            &[(0x4, "sw_power_cap"), (0x8, "hw_slowdown"), (0x20, "sw_thermal_slowdown"), (0x40, "hw_thermal_slowdown"), (0x80, "hw_power_brake_slowdown")];
        for (bit, name) in REASONS {
            if mask & bit != 0 {
                t.throttle_reasons.push((*name).into());
            }
        }
    }
    Some(t)
}

/// amdgpu: `card*/device/hwmon/hwmon*/{temp1_input, freq1_input}` (milli-°C, Hz).
pub fn hwmon(drm: &Path) -> Option<Telemetry> {
    let mut cards: Vec<_> = std::fs::read_dir(drm).ok()?.flatten().map(|e| e.path()).collect();
    cards.sort();
    for card in cards {
        let name = card.file_name()?.to_string_lossy().to_string();
        if !name.starts_with("card") || name.contains('-') {
            continue;
        }
        let Ok(hw) = std::fs::read_dir(card.join("device/hwmon")) else { continue };
        for h in hw.flatten() {
            let p = h.path();
            let read = |f: &str| std::fs::read_to_string(p.join(f)).ok().and_then(|s| s.trim().parse::<f64>().ok());
            let temp = read("temp1_input").map(|v| v / 1000.0);
            let sclk = read("freq1_input").map(|v| v / 1e6);
            let mclk = read("freq2_input").map(|v| v / 1e6);
            let power = read("power1_average").or_else(|| read("power1_input")).map(|v| v / 1e6);
            if temp.is_some() || sclk.is_some() {
                return Some(Telemetry {
                    source: "hwmon".into(),
                    sm_clock_mhz: sclk,
                    mem_clock_mhz: mclk,
                    temperature_c: temp,
                    power_w: power,
                    throttle_reasons: Vec::new(),
                });
            }
        }
    }
    None
}

/// Keep the reading taken after the sample (the clocks it ended at), with
/// the throttle reasons seen at either end and the lower SM clock.
pub fn merge(before: Option<Telemetry>, after: Option<Telemetry>) -> Option<Telemetry> {
    match (before, after) {
        (Some(b), Some(mut a)) => {
            for r in b.throttle_reasons {
                if !a.throttle_reasons.contains(&r) {
                    a.throttle_reasons.push(r);
                }
            }
            a.sm_clock_mhz = match (b.sm_clock_mhz, a.sm_clock_mhz) {
                (Some(x), Some(y)) => Some(x.min(y)),
                (x, y) => y.or(x),
            };
            a.temperature_c = match (b.temperature_c, a.temperature_c) {
                (Some(x), Some(y)) => Some(x.max(y)),
                (x, y) => y.or(x),
            };
            Some(a)
        }
        (b, a) => a.or(b),
    }
}

pub fn is_throttled(t: &Telemetry) -> bool {
    !t.throttle_reasons.is_empty() || t.temperature_c.is_some_and(|c| c >= HOT_C)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_smi_line() {
        let t = parse_nvidia_smi("1980, 3201, 45, 120.5, 0x0000000000000000\n").unwrap();
        assert_eq!(t.sm_clock_mhz, Some(1980.0));
        assert_eq!(t.temperature_c, Some(45.0));
        assert!(!is_throttled(&t));
        let t = parse_nvidia_smi("1200, 3201, 85, 699.0, 0x0000000000000044\n").unwrap();
        assert_eq!(t.throttle_reasons, vec!["sw_power_cap", "hw_thermal_slowdown"]);
        assert!(is_throttled(&t));
        // Captured on an idle H200 (driver 580.159): idle bit 0x1 alone is not throttling.
        let t = parse_nvidia_smi("345, 3201, 37, 79.61, 0x0000000000000001\n").unwrap();
        assert_eq!((t.sm_clock_mhz, t.mem_clock_mhz, t.power_w), (Some(345.0), Some(3201.0), Some(79.61)));
        assert!(!is_throttled(&t));
        // [N/A] power is tolerated.
        let t = parse_nvidia_smi("345, 405, 30, [N/A], 0x0000000000000001").unwrap();
        assert!(t.power_w.is_none() && !is_throttled(&t));
        assert!(parse_nvidia_smi("garbage").is_none());
    }

    #[test]
    fn hwmon_tree() {
        let d = tempfile::tempdir().unwrap();
        let hw = d.path().join("card0/device/hwmon/hwmon3");
        std::fs::create_dir_all(&hw).unwrap();
        std::fs::write(hw.join("temp1_input"), "93000\n").unwrap();
        std::fs::write(hw.join("freq1_input"), "2500000000\n").unwrap();
        let t = hwmon(d.path()).unwrap();
        assert_eq!(t.temperature_c, Some(93.0));
        assert_eq!(t.sm_clock_mhz, Some(2500.0));
        assert!(is_throttled(&t));
        assert!(hwmon(&d.path().join("none")).is_none());
    }
}
