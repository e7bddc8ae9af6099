//! Which replica owns which member: rendezvous (highest-random-weight) hashing over the
//! live replicas. Every replica computes it alone from the same two lists and agrees;
//! a replica joining takes about 1/N of the members, from every other replica alike,
//! and a replica leaving gives only its own members away.

use sha2::Digest;

/// The weight of `replica` for `member`: the first 8 bytes of SHA-256 over both names
/// (stable across versions and machines, unlike the standard library's hasher).
fn weight(replica: &str, member: &str) -> u64 {
    let mut hash = sha2::Sha256::new();
    hash.update(replica.as_bytes());
    hash.update([0]);
    hash.update(member.as_bytes());
    let digest = hash.finalize();
    u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"))
}

/// The replica among `replicas` that owns `member` (none when there are no replicas);
/// ties (never seen in practice) go to the greater name.
pub fn owner<'r>(member: &str, replicas: &'r [String]) -> Option<&'r str> {
    replicas.iter().max_by_key(|r| (weight(r, member), r.as_str())).map(String::as_str)
}

/// Every member's owner.
#[cfg(test)]
pub fn assignment<'m>(
    members: impl IntoIterator<Item = &'m String>,
    replicas: &[String],
) -> std::collections::BTreeMap<String, String> {
    members.into_iter().filter_map(|m| owner(m, replicas).map(|r| (m.clone(), r.to_owned()))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn names(prefix: &str, n: usize) -> Vec<String> {
        (0..n).map(|i| format!("{prefix}{i}")).collect()
    }

    #[test]
    fn a_replica_joining_takes_about_a_share_and_only_from_the_others() {
        let members = names("member-", 1000);
        for n in [2, 3, 5] {
            let before = assignment(&members, &names("replica-", n));
            let after = assignment(&members, &names("replica-", n + 1));
            let newcomer = format!("replica-{n}");
            let moved: Vec<&String> = members.iter().filter(|m| before[*m] != after[*m]).collect();
            assert!(moved.iter().all(|m| after[*m] == newcomer), "members move only to the newcomer");
            let share = 1000.0 / (n + 1) as f64;
            let got = moved.len() as f64;
            assert!((got - share).abs() < share * 0.25, "{n} → {}: {got} moved, about {share} expected", n + 1);
        }
    }

    proptest! {
        #[test]
        fn a_replica_leaving_gives_away_only_its_own(n in 2usize..8, gone in 0usize..8, seed in 0u32..1000) {
            let gone = gone % n;
            let members = names(&format!("m{seed}-"), 200);
            let replicas = names("r", n);
            let before = assignment(&members, &replicas);
            let rest: Vec<String> = replicas.iter().filter(|r| **r != replicas[gone]).cloned().collect();
            let after = assignment(&members, &rest);
            for m in &members {
                if before[m] != replicas[gone] {
                    prop_assert_eq!(&before[m], &after[m]);
                }
                prop_assert!(after[m] != replicas[gone]);
            }
        }

        #[test]
        fn the_assignment_does_not_depend_on_the_order_replicas_are_listed(n in 1usize..6, seed in 0u32..1000) {
            let members = names(&format!("m{seed}-"), 50);
            let mut replicas = names("r", n);
            let one = assignment(&members, &replicas);
            replicas.reverse();
            prop_assert_eq!(one, assignment(&members, &replicas));
        }
    }
}
