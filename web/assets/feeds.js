// replayguard dashboard: the redundant broker paths (mqtt.feeds). Each
// feed's connection and the share of messages it delivered first (the path
// that is winning) and how far it trails the other (its last twin's delay),
// and the twins it brought after their key left the key window, which were
// applied again, beside the live badge. GET /api/v1/feeds is polled
// while the process consumes more than one path; with one path the strip
// stays hidden. Loaded before app.js, whose helpers (el, api, $) it uses,
// and which calls startFeeds.
"use strict";

const FEEDS_POLL = 2000; // ms between reads while feeds are configured

async function loadFeeds() {
  let st;
  try {
    st = await api("/api/v1/feeds");
  } catch (e) {
    if (e.status === 404) return false; // a server without the endpoint
    throw e;
  }
  renderFeeds(st.feeds || []);
  return st.feeds && st.feeds.length > 0;
}

function renderFeeds(feeds) {
  const strip = $("feeds");
  strip.hidden = feeds.length === 0;
  const won = (f) => f.first - (f.applied_again || 0); // a twin applied again was not first
  const firsts = feeds.reduce((n, f) => n + won(f), 0);
  strip.replaceChildren(...feeds.map((f) => {
    const share = firsts > 0 ? Math.round(100 * won(f) / firsts) : 0;
    const item = el("span", "feed " + (f.connected ? "up" : "down"));
    item.dataset.feed = f.name;
    item.title = `${f.deliveries.toLocaleString()} deliveries, ${f.first.toLocaleString()} first, ${f.duplicates.toLocaleString()} duplicates`;
    item.append(el("b", "", "feed " + f.name), el("span", "state", f.connected ? "connected" : "DOWN"),
      el("span", "share", share + "% first"));
    if (f.behind_seconds > 0) item.append(el("span", "behind", "trails " + behindText(f.behind_seconds)));
    if (f.applied_again > 0) {
      item.append(el("span", "again", f.applied_again.toLocaleString() + " applied again"));
      item.title += `, ${f.applied_again.toLocaleString()} applied again (their key had left the key window)`;
    }
    return item;
  }));
}

// behindText writes how far a feed trails: milliseconds, or seconds.
function behindText(s) {
  return s < 1 ? Math.round(s * 1000) + " ms" : s.toFixed(1) + " s";
}

function startFeeds() {
  const poll = async () => {
    let again = false;
    try { again = await loadFeeds(); } catch (e) { again = true; }
    if (again) setTimeout(poll, FEEDS_POLL);
  };
  poll();
}
