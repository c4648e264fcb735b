//! Timing contenders against each other on a shared, noisy machine (this
//! one's neighbours halve its speed for seconds at a time): each round
//! times every contender once, one after another, so a slow spell lands on
//! all of them alike, and a ratio is the median over rounds of that round's
//! ratio. Each timed call follows an untimed call of the same contender,
//! so it finds the allocator and caches as its own last call left them (as
//! in a service that validates batch after batch), not as the previous
//! contender did: a `serde_json::Value` DOM returning its memory made the
//! next `validate` fault its pages in again, which a loop of `validate`
//! alone never pays. Shared by the validator's and the host's benches.

use std::time::Instant;

/// The seconds each contender took in each round.
pub struct Rounds {
    secs: Vec<Vec<f64>>,
}

impl Rounds {
    /// Runs `rounds` rounds of `contenders`.
    pub fn run(rounds: usize, contenders: &mut [&mut dyn FnMut()]) -> Rounds {
        let mut secs = vec![Vec::with_capacity(rounds); contenders.len()];
        for _ in 0..rounds {
            for (f, times) in contenders.iter_mut().zip(&mut secs) {
                f();
                let start = Instant::now();
                f();
                times.push(start.elapsed().as_secs_f64());
            }
        }
        Rounds { secs }
    }

    /// Contender `i`'s median seconds.
    pub fn median_secs(&self, i: usize) -> f64 {
        median(self.secs[i].clone())
    }

    /// The median over rounds of contender `baseline`'s time over contender
    /// `i`'s: above 1 when `i` is the faster.
    pub fn speed(&self, i: usize, baseline: usize) -> f64 {
        median(self.speeds(i, baseline))
    }

    /// Each round's time of contender `baseline` over contender `i`'s, in
    /// round order (how much the machine moved within the run).
    pub fn speeds(&self, i: usize, baseline: usize) -> Vec<f64> {
        self.secs[baseline].iter().zip(&self.secs[i]).map(|(b, t)| b / t).collect()
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
