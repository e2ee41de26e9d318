//! Statistics behind A/B verdicts, all katlas-stats': the median, moments, quantiles and the
//! Welch interval shared with the store and the collector, and the verdicts' robust summaries,
//! bootstrap and exact Mann–Whitney. They live in that small crate so they are built optimised
//! while this one is not: the eval's simulations call them millions of times.

pub use katlas_stats::{
    bootstrap_relative_change_ci, bootstrap_relative_change_cis, cv, drift, mad, mann_whitney, mean, median, median_ci, normal_cdf, quantile_sorted,
    relative_change, robust_cv, sorted, stddev, t_quantile, trimmed_mean, variance, welch_log, welch_log_ci, z_quantile, MannWhitney, WelchLog, TRIM,
};
