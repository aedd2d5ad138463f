// core/markup.h: text made safe inside XML and HTML (the SVG charts and HTML reports).
#pragma once

#include <string>
#include <string_view>

namespace orrery {

// `text` with &, <, >, " and ' replaced by their entities, for element text and attribute values.
std::string escape_markup(std::string_view text);

}  // namespace orrery
