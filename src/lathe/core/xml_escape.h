// Escaping text for XML/SVG/HTML output (charts and reports): & < > " become entities.
#pragma once

#include <string>
#include <string_view>

namespace lathe {

std::string escape_xml(std::string_view text);

}  // namespace lathe
