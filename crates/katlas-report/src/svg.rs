//! Plot geometry for the report's inline SVG: axes (linear or log), tick choice and number
//! labels. The marks themselves are written with maud in `plots`, so every label is escaped.

/// One axis: data range `lo..hi` onto pixels `px_lo..px_hi` (`px_hi < px_lo` for a y axis).
#[derive(Debug, Clone, Copy)]
pub struct Axis {
    pub lo: f64,
    pub hi: f64,
    pub log: bool,
    pub px_lo: f64,
    pub px_hi: f64,
}

impl Axis {
    /// A linear axis over the values, padded by 5% and widened when they are all equal.
    pub fn linear(values: impl IntoIterator<Item = f64>, px_lo: f64, px_hi: f64) -> Axis {
        let (mut lo, mut hi) = min_max(values).unwrap_or((0.0, 1.0));
        if hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
            let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.05 };
            lo -= pad;
            hi += pad;
        } else {
            let pad = (hi - lo) * 0.05;
            lo -= pad;
            hi += pad;
        }
        Axis { lo, hi, log: false, px_lo, px_hi }
    }

    /// A log axis over the (positive) values, widened to whole decades.
    pub fn log(values: impl IntoIterator<Item = f64>, px_lo: f64, px_hi: f64) -> Axis {
        let (lo, hi) = min_max(values.into_iter().filter(|v| *v > 0.0)).unwrap_or((1.0, 10.0));
        let lo = 10f64.powf(lo.log10().floor());
        let mut hi = 10f64.powf(hi.log10().ceil());
        if hi <= lo {
            hi = lo * 10.0;
        }
        Axis { lo, hi, log: true, px_lo, px_hi }
    }

    /// Pixel position of `v` (clamped to the axis).
    pub fn at(&self, v: f64) -> f64 {
        let t = if self.log {
            let v = v.max(self.lo * 1e-3);
            (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        self.px_lo + t.clamp(-0.02, 1.02) * (self.px_hi - self.px_lo)
    }

    pub fn contains(&self, v: f64) -> bool {
        v >= self.lo && v <= self.hi
    }

    /// Tick values: decades on a log axis, 1/2/5 steps (about 5 ticks) on a linear one.
    pub fn ticks(&self) -> Vec<f64> {
        if self.log {
            let (a, b) = (self.lo.log10().round() as i32, self.hi.log10().round() as i32);
            return (a..=b).map(|e| 10f64.powi(e)).collect();
        }
        let raw = (self.hi - self.lo) / 5.0;
        let mag = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
        let first = (self.lo / step).ceil() as i64;
        let last = (self.hi / step).floor() as i64;
        (first..=last).map(|i| i as f64 * step).collect()
    }
}

fn min_max(values: impl IntoIterator<Item = f64>) -> Option<(f64, f64)> {
    values.into_iter().filter(|v| v.is_finite()).fold(None, |acc, v| match acc {
        None => Some((v, v)),
        Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
    })
}

/// A short number for a tick or a label: `0.001`, `2.5`, `1,200` → `1.2k`, `3e-5`.
pub fn num(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 {
        return "0".into();
    }
    if !(1e-3..1e6).contains(&a) {
        return format!("{v:.0e}");
    }
    if a >= 1e3 {
        return trim(format!("{:.1}k", v / 1e3));
    }
    let digits = if a >= 100.0 {
        0
    } else if a >= 10.0 {
        1
    } else if a >= 1.0 {
        2
    } else {
        (-a.log10().floor()) as usize + 2
    };
    trim(format!("{v:.digits$}"))
}

fn trim(s: String) -> String {
    let (body, suffix) = match s.strip_suffix('k') {
        Some(b) => (b.to_string(), "k"),
        None => (s, ""),
    };
    let body = if body.contains('.') { body.trim_end_matches('0').trim_end_matches('.').to_string() } else { body };
    format!("{body}{suffix}")
}

/// A pixel coordinate as SVG text (one decimal).
pub fn px(v: f64) -> String {
    format!("{v:.1}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_axis_spans_whole_decades_and_places_them_evenly() {
        let a = Axis::log([0.02, 350.0], 0.0, 400.0);
        assert_eq!((a.lo, a.hi), (0.01, 1000.0));
        assert_eq!(a.ticks(), vec![0.01, 0.1, 1.0, 10.0, 100.0, 1000.0]);
        assert!((a.at(1.0) - 160.0).abs() < 1e-9, "{}", a.at(1.0));
        assert_eq!(a.at(0.0), a.at(a.lo * 1e-3), "zero is clamped, never NaN");
    }

    #[test]
    fn linear_ticks_are_round_and_inside_the_range() {
        let a = Axis::linear([97.0, 104.0], 250.0, 10.0);
        let t = a.ticks();
        assert!(t.len() >= 3 && t.iter().all(|v| a.contains(*v)), "{t:?}");
        assert!(t.windows(2).all(|w| ((w[1] - w[0]) - (t[1] - t[0])).abs() < 1e-9));
        assert!(a.at(a.lo) > a.at(a.hi), "y grows upwards");
        let flat = Axis::linear([5.0, 5.0], 0.0, 1.0);
        assert!(flat.lo < 5.0 && flat.hi > 5.0);
    }

    #[test]
    fn numbers_are_short() {
        assert_eq!(num(0.001), "0.001");
        assert_eq!(num(0.0123), "0.0123");
        assert_eq!(num(2.5), "2.5");
        assert_eq!(num(41.8), "41.8");
        assert_eq!(num(1200.0), "1.2k");
        assert_eq!(num(4171.1), "4.2k");
        assert_eq!(num(100.0), "100");
        assert_eq!(num(3e-5), "3e-5");
    }
}
