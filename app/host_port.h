// "HOST:PORT" flags (--http) shared by the commands that listen.
#ifndef STREAMVEC_APP_HOST_PORT_H_
#define STREAMVEC_APP_HOST_PORT_H_

#include <string>

namespace streamvec::app {

// Parses "HOST:PORT" or "[IPv6]:PORT" with PORT in [0, 65535] (0: pick a free port). Returns
// false on anything else.
bool ParseHostPort(const std::string& text, std::string* host, int* port);

}  // namespace streamvec::app

#endif  // STREAMVEC_APP_HOST_PORT_H_
