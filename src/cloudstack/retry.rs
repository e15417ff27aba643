//! When a failed CloudStack call is tried again, and how long to wait first: capped
//! exponential backoff with full jitter, for transient failures only. Which failures are
//! transient is the error's own verdict ([`ApiError::is_transient`]); running the attempts,
//! sleeping and counting them belong to the client.

use std::time::Duration;

use rand::Rng;

use super::error::ApiError;

/// Retries of transient failures: capped exponential backoff with full jitter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1 means no retry).
    pub attempts: u32,
    /// Upper bound of the wait before the first retry; doubled for each further retry.
    pub base_delay: Duration,
    /// The wait never exceeds this.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 3,
            base_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(5),
        }
    }
}

impl RetryPolicy {
    /// The wait before trying again after attempt `attempt` (1-based) failed with `error`, or
    /// `None` when that failure is final: it is not transient, or no attempt is left.
    pub fn retry_after(&self, attempt: u32, error: &ApiError) -> Option<Duration> {
        (error.is_transient() && attempt < self.attempts.max(1)).then(|| self.backoff(attempt))
    }

    /// The longest wait before retry number `retry` (1-based): `base * 2^(retry-1)`, capped.
    pub fn max_backoff(&self, retry: u32) -> Duration {
        let factor = 1u32
            .checked_shl(retry.saturating_sub(1))
            .unwrap_or(u32::MAX);
        self.base_delay
            .checked_mul(factor)
            .unwrap_or(self.max_delay)
            .min(self.max_delay)
    }

    /// A wait drawn uniformly from zero to [`RetryPolicy::max_backoff`] ("full jitter"), so
    /// clients that failed together do not retry together.
    pub fn backoff(&self, retry: u32) -> Duration {
        let max = self.max_backoff(retry);
        let millis = u64::try_from(max.as_millis()).unwrap_or(u64::MAX);
        Duration::from_millis(rand::rng().random_range(0..=millis))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloudstack::transport::TransportError;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let policy = RetryPolicy::default();
        let millis: Vec<u128> = (1..=7)
            .map(|retry| policy.max_backoff(retry).as_millis())
            .collect();
        assert_eq!(millis, [200, 400, 800, 1600, 3200, 5000, 5000]);
        assert_eq!(policy.max_backoff(100), Duration::from_secs(5));
        for retry in 1..=5 {
            assert!(policy.backoff(retry) <= policy.max_backoff(retry));
        }
    }

    #[test]
    fn only_transient_failures_are_retried_and_only_while_attempts_last() {
        let policy = RetryPolicy::default();
        let transient = ApiError::Http {
            command: "listZones".into(),
            status: 503,
            snippet: "Service Unavailable".into(),
        };
        let timeout = ApiError::Transport {
            command: "listZones".into(),
            source: TransportError::Timeout {
                url: "u".into(),
                seconds: 1,
            },
        };
        let answered = ApiError::CloudStack {
            command: "listZones".into(),
            code: 530,
            cserrorcode: None,
            text: "no".into(),
        };
        for error in [&transient, &timeout] {
            for attempt in 1..=2 {
                let delay = policy.retry_after(attempt, error);
                assert!(
                    delay.is_some_and(|d| d <= policy.max_backoff(attempt)),
                    "{attempt}: {delay:?}"
                );
            }
            assert_eq!(policy.retry_after(3, error), None);
        }
        assert_eq!(policy.retry_after(1, &answered), None);
        let once = RetryPolicy {
            attempts: 0,
            ..RetryPolicy::default()
        };
        assert_eq!(once.retry_after(1, &transient), None);
    }
}
