//! Circles in a graph of names: the groups that use each other round a circle, and
//! one circle through each.

use std::collections::{BTreeMap, BTreeSet};

/// Each group of nodes of `depends` that use each other round a circle (Tarjan's
/// strongly connected components): the group's nodes and one circle through it.
pub(super) fn circles_of(
    depends: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<(Vec<String>, Vec<String>)> {
    let names: Vec<&String> = depends.keys().collect();
    let index: BTreeMap<&String, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let next: Vec<Vec<usize>> = names
        .iter()
        .map(|n| {
            depends[*n]
                .iter()
                .filter_map(|t| index.get(t).copied())
                .collect()
        })
        .collect();
    let mut tarjan = Tarjan {
        next: &next,
        index: vec![None; names.len()],
        low: vec![0; names.len()],
        on: vec![false; names.len()],
        stack: Vec::new(),
        counter: 0,
        groups: Vec::new(),
    };
    for v in 0..names.len() {
        if tarjan.index[v].is_none() {
            tarjan.visit(v);
        }
    }
    tarjan
        .groups
        .into_iter()
        .filter(|g| g.len() > 1)
        .map(|group| {
            let members: BTreeSet<usize> = group.iter().copied().collect();
            let start = *members.iter().next().unwrap();
            let mut circle = vec![names[start].clone()];
            let path = path_back(&next, &members, start);
            circle.extend(path.into_iter().map(|v| names[v].clone()));
            (members.iter().map(|&v| names[v].clone()).collect(), circle)
        })
        .collect()
}

/// A shortest way from `start` round to itself, inside `members` (breadth first).
fn path_back(next: &[Vec<usize>], members: &BTreeSet<usize>, start: usize) -> Vec<usize> {
    let mut came_from: BTreeMap<usize, usize> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &w in &next[v] {
            if !members.contains(&w) {
                continue;
            }
            if w == start {
                let mut path = vec![start];
                let mut at = v;
                while at != start {
                    path.push(at);
                    at = came_from[&at];
                }
                path.reverse();
                return path;
            }
            if let std::collections::btree_map::Entry::Vacant(e) = came_from.entry(w) {
                e.insert(v);
                queue.push_back(w);
            }
        }
    }
    unreachable!("a strongly connected group has a circle through each member")
}

struct Tarjan<'a> {
    next: &'a [Vec<usize>],
    index: Vec<Option<usize>>,
    low: Vec<usize>,
    on: Vec<bool>,
    stack: Vec<usize>,
    counter: usize,
    groups: Vec<Vec<usize>>,
}

impl Tarjan<'_> {
    fn visit(&mut self, v: usize) {
        self.index[v] = Some(self.counter);
        self.low[v] = self.counter;
        self.counter += 1;
        self.stack.push(v);
        self.on[v] = true;
        for &w in &self.next[v] {
            match self.index[w] {
                None => {
                    self.visit(w);
                    self.low[v] = self.low[v].min(self.low[w]);
                }
                Some(i) if self.on[w] => self.low[v] = self.low[v].min(i),
                Some(_) => {}
            }
        }
        if Some(self.low[v]) == self.index[v] {
            let mut group = Vec::new();
            loop {
                let w = self.stack.pop().unwrap();
                self.on[w] = false;
                group.push(w);
                if w == v {
                    break;
                }
            }
            self.groups.push(group);
        }
    }
}
