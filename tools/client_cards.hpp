// SPDX-License-Identifier: MIT
// What `redlease status` reads of the clients' cards (redlease/client_card.hpp): the description of
// each holder's client, and a read-write lock's waiting writers.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "redlease/redlease.hpp"

namespace redlease::cli {

/// A client's card as status shows it.
struct card_view {
  std::string host, pid, program, name;
};

/// The cards of the clients `ids` (one HGETALL each): clients without one (an older redlease,
/// Redisson, a card that expired, a key the ACL refuses) are left out.
std::map<std::string, card_view> read_cards(client& c, const std::vector<std::string>& ids);

/// "(host H, pid P, program X, name N)", or for `nullptr` "(no description: an older client or
/// another library)".
std::string card_text(const card_view* card);
/// The card as a JSON object, or `null`.
std::string card_json(const card_view* card);

/// A client whose card says it waits for a write lock.
struct waiting_writer {
  std::string client;   // its id
  long long since_ms = 0;  // when its wait began (epoch ms), 0 if unreadable
  card_view card;
};

/// The waiting writers of the read-write lock `name` the cards record. `complete` is false when
/// the bounded scan of the cards stopped before it had seen them all (there may be more).
struct waiting_writers {
  std::vector<waiting_writer> found;
  bool complete = true;
};
/// `nodes`: the clients whose keyspaces hold the cards: the one client of a single server, or one
/// per master of a cluster (SCAN sees one node's keys only).
waiting_writers find_waiting_writers(const std::vector<client*>& nodes, std::string_view name);

}  // namespace redlease::cli
