//! The Retry-After of a level's 429s, as kube's dropped-requests tracker
//! derives it: 1 s at first; doubled (up to 32 s) once the drops of the
//! last Retry-After seconds reach three per second of it, and no more
//! often than once per Retry-After; lowered by one second while they stay
//! under one per second of it.

const MAX_RETRY_AFTER: i64 = 32;

#[derive(Debug)]
pub struct Drops {
    /// Drops per whole second, oldest first (the current second apart).
    history: Vec<(i64, i64)>,
    second: i64,
    count: i64,
    retry_after: i64,
    raised_at: i64,
}

impl Default for Drops {
    fn default() -> Self {
        Drops {
            history: Vec::new(),
            second: 0,
            count: 0,
            retry_after: 1,
            raised_at: 0,
        }
    }
}

impl Drops {
    /// One more request dropped during second `now` (Unix time).
    pub fn record(&mut self, now: i64) {
        if now == self.second {
            self.count += 1;
            return;
        }
        self.history.push((self.second, self.count));
        let keep = (2 * self.retry_after).min(MAX_RETRY_AFTER);
        self.history.retain(|(t, _)| now - t <= keep);
        self.second = now;
        self.count = 1;
        let recent: i64 = self
            .history
            .iter()
            .filter(|(t, _)| now - t <= self.retry_after && *t < now)
            .map(|(_, n)| n)
            .sum();
        if now - self.raised_at >= self.retry_after && recent >= 3 * self.retry_after {
            self.retry_after = (self.retry_after * 2).min(MAX_RETRY_AFTER);
            self.raised_at = now;
        } else if recent < self.retry_after && self.retry_after > 1 {
            self.retry_after -= 1;
        }
    }

    pub fn retry_after(&self) -> i64 {
        self.retry_after
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_under_sustained_drops_and_falls_back() {
        let mut d = Drops::default();
        assert_eq!(d.retry_after(), 1);
        // Many drops in one second: nothing changes until the next second.
        for _ in 0..10 {
            d.record(100);
        }
        assert_eq!(d.retry_after(), 1);
        d.record(101);
        assert_eq!(d.retry_after(), 2);
        // Sustained: doubles at most once per Retry-After, up to 32.
        for s in 101..200 {
            for _ in 0..200 {
                d.record(s);
            }
        }
        assert_eq!(d.retry_after(), 32);
        // Quiet: one second less per drop seen after a quiet spell.
        d.record(300);
        assert_eq!(d.retry_after(), 31);
        d.record(400);
        assert_eq!(d.retry_after(), 30);
    }
}
