#include "lockstep/comm/redis_store.h"

#define HIREDIS_NESTED_INCLUDE
#include <fmt/format.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/redis_store.h>

#include <cstdio>
#include <thread>

#include "lockstep/comm/gloo_message.h"
#include "lockstep/core/enforce.h"

namespace lockstep {
namespace {

// How long one command waits for the server's answer. Redis answers in well under a millisecond; a server
// that is stopped or cut off answers nothing, and the command then fails as a lost connection does.
constexpr timeval kCommandTimeout{5, 0};

// Gloo's store with a bounded wait for each answer and the one command it lacks: the connections of
// RedisStore are all of this class.
class GlooRedisStore : public gloo::rendezvous::RedisStore {
 public:
  GlooRedisStore(const std::string& host, int port) : RedisStore(host, port) {
    if (redisSetTimeout(redis_, kCommandTimeout) != REDIS_OK) GLOO_THROW_IO_EXCEPTION(redis_->errstr);
  }
  void Delete(const std::string& key) {
    auto* reply = static_cast<redisReply*>(redisCommand(redis_, "DEL %b", key.data(), key.size()));
    if (reply == nullptr) GLOO_THROW_IO_EXCEPTION(redis_->errstr);  // the connection failed
    const bool refused = reply->type == REDIS_REPLY_ERROR;
    const std::string error = refused ? std::string(reply->str, reply->len) : "";
    freeReplyObject(reply);
    if (refused) throw IoError(fmt::format("Redis refused to remove '{}': {}", key, error));
  }
};

// Gloo's message of a failed command; hiredis reports a command that timed out as EAGAIN's text.
std::string FailureOf(const gloo::IoException& e) {
  const std::string message = GlooMessage(e.what());
  if (message.find("Resource temporarily unavailable") != std::string::npos)
    return fmt::format("no answer within {} s", kCommandTimeout.tv_sec);
  return message;
}

}  // namespace

RedisStore::RedisStore(std::string host, int port, std::string who, std::chrono::seconds reconnect_for)
    : host_(std::move(host)), port_(port), who_(std::move(who)), reconnect_for_(reconnect_for) {
  try {
    redis_ = std::make_unique<GlooRedisStore>(host_, port_);
  } catch (const std::exception& e) {
    throw IoError(fmt::format("cannot reach Redis at {}:{} ({})", host_, port_, GlooMessage(e.what())));
  }
}

RedisStore::~RedisStore() = default;

template <typename Operation>
auto RedisStore::Reconnecting(const std::string& what, Operation operation) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto deadline = std::chrono::steady_clock::now() + reconnect_for_;
  for (bool retry = false;; retry = true, std::this_thread::sleep_for(std::chrono::milliseconds(500))) {
    // Gloo reports a failed or lost connection as IoException and leaves the connection unusable; an answer
    // of the server (a key that exists) is another exception, which `operation` sees or passes on.
    try {
      if (!redis_) redis_ = std::make_unique<GlooRedisStore>(host_, port_);
      auto result = operation(*redis_, retry);
      if (retry)
        std::fprintf(stderr, "%s: Redis %s:%d: connected again\n", who_.c_str(), host_.c_str(), port_);
      return result;
    } catch (const gloo::IoException& e) {
      redis_.reset();
      if (std::chrono::steady_clock::now() >= deadline)
        throw StoreUnavailable(fmt::format("Redis {}:{}: {} failed for {} s: {}", host_, port_, what,
                                           reconnect_for_.count(), FailureOf(e)));
      if (!retry)
        std::fprintf(stderr, "%s: Redis %s:%d: %s failed (%s); connecting again for up to %lld s\n",
                     who_.c_str(), host_.c_str(), port_, what.c_str(), FailureOf(e).c_str(),
                     static_cast<long long>(reconnect_for_.count()));
    }
  }
}

bool RedisStore::Create(const std::string& key, const std::vector<char>& data) {
  return Reconnecting(fmt::format("writing '{}'", key), [&](gloo::rendezvous::RedisStore& redis, bool) {
    if (redis.check({key})) return false;  // (also a write of an earlier try whose answer was lost)
    try {
      redis.set(key, data);
      return true;
    } catch (const std::exception&) {
      if (redis.check({key})) return false;  // SETNX refused: another process created it just now
      throw;
    }
  });
}

void RedisStore::set(const std::string& key, const std::vector<char>& data) {
  Reconnecting(fmt::format("writing '{}'", key), [&](gloo::rendezvous::RedisStore& redis, bool retry) {
    if (!retry || !redis.check({key})) redis.set(key, data);  // a retry finds the lost try's write
    return true;
  });
}

std::vector<char> RedisStore::get(const std::string& key) {
  // Gloo's get waits for the key; waiting here instead leaves the connection to other threads meanwhile
  // (a communicator's channels connect through one store at once).
  wait({key});
  return Reconnecting(fmt::format("reading '{}'", key),
                      [&](gloo::rendezvous::RedisStore& redis, bool) { return redis.get(key); });
}

void RedisStore::wait(const std::vector<std::string>& keys) { wait(keys, kDefaultTimeout); }

void RedisStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  // Polled here rather than in Gloo's wait, so that a reconnect does not restart the timeout.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!check(keys)) {
    if (std::chrono::steady_clock::now() >= deadline)
      GLOO_THROW_IO_EXCEPTION("Wait timeout for key(s) on Redis ", host_, ":", port_);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void RedisStore::Remove(const std::string& key) {
  Reconnecting(fmt::format("removing '{}'", key), [&](gloo::rendezvous::RedisStore& redis, bool) {
    static_cast<GlooRedisStore&>(redis).Delete(key);
    return true;
  });
}

bool RedisStore::check(const std::vector<std::string>& keys) {
  return Reconnecting("looking up keys",
                      [&](gloo::rendezvous::RedisStore& redis, bool) { return redis.check(keys); });
}

}  // namespace lockstep
